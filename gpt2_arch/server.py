"""`max serve` with OpenAI's /v1/completions semantics: MAX 26.7's own server, its app wrapped in
gpt2_arch.middleware.Completions. runtime.server runs it (pixi run serve, step 14's check):

    python -m gpt2_arch.server serve --custom-architectures gpt2_arch --model <checkpoint folder> ...

takes `max serve`'s arguments. MAX builds its FastAPI app inside its `serve` command; the one hook it
leaves is the name that command calls, `fastapi_app`, replaced here (in this process only) by one that
adds the middleware. A MAX release that moves it fails step 14's served part and tests/test_step14.py.
"""

from __future__ import annotations

import sys

from max._entrypoints.cli.serve import serve_api_and_model_worker as launch

from gpt2_arch.middleware import Completions

# MAX is imported inside the functions that use it: importing it takes seconds.

_max_app = launch.fastapi_app


def fastapi_app(settings, serving):
    """MAX's app, with OpenAI's completions semantics in front of its routes."""
    app = _max_app(settings, serving)
    app.add_middleware(Completions, tokenizer=serving.tokenizer)
    return app


def main() -> int:
    from max._entrypoints.pipelines import main as max_main

    launch.fastapi_app = fastapi_app
    sys.argv[0] = "max"
    return max_main()


if __name__ == "__main__":
    sys.exit(main())
