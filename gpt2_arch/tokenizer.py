"""GPT-2's tokenizer for MAX 26.7's serving stack: MAX's TextTokenizer, with every prompt checked before
the model sees it.

MAX's server runs the tokenizer in its API process and answers an `InputError` with a 400 that carries
the message; an error inside the model worker instead ends the worker, and with it the server (a token
id past the vocabulary is an index out of range in `wte`'s gather). So everything a request could hold
that the model cannot run is refused here:

    prompt token ids outside [0, vocab)          400, which id, where, and the range
    an empty prompt                              400 (the model has no row to give a next token from)
    prompt + max_tokens past n_positions         400, the numbers (OpenAI's answer; MAX would shorten the
                                                 answer and say only finish_reason "length"); a prompt of
                                                 all n_positions takes max_tokens 0 or 1 (scoring it)
    stop_token_ids outside [0, vocab)            400
    echo with logprobs on a server without       400 (MAX's worker would raise and stop)
    --enable-echo

An echo with logprobs shares no pages through MAX's prefix cache (its rows would get no log-probabilities).

One id decoded alone is how MAX's server names each logprobs alternative, and it keys top_logprobs by
that text: here a token's key as OpenAI's API writes it (gpt2_arch/token_keys.py), so that two tokens
that decode alike (two parts of split characters, both U+FFFD) keep an entry each.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from max.pipelines.context import InputError
from max.pipelines.lib import TextTokenizer

from gpt2_arch.token_keys import token_key

# transformers is imported inside the functions that use it: importing it takes seconds.


def model_limits(model_path: str) -> tuple[int, int]:
    """(vocab_size, n_positions) from the checkpoint's config.json (a folder, or a repo in the hub's cache)."""
    folder = Path(model_path)
    if (folder / "config.json").exists():
        config = json.loads((folder / "config.json").read_text())
    else:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(model_path).to_dict()
    return int(config["vocab_size"]), int(config["n_positions"])


def bad_ids(ids, limit: int) -> list[tuple[int, object]]:
    """(index, value) of every entry of `ids` that is not an int in [0, limit)."""
    return [(i, t) for i, t in enumerate(ids) if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < limit]


def ids_refused(name: str, ids, vocab: int) -> str | None:
    """Why `ids` (the request's `name`) cannot be run, naming the first bad ones and their positions; or None."""
    if not (bad := bad_ids(list(ids), vocab)):
        return None
    listed = ", ".join(f"{v!r} at position {i}" for i, v in bad[:3])
    return (f"{name} must be integers in [0, {vocab}) (GPT-2's vocabulary): got {listed}"
            + (f" and {len(bad) - 3} more" if len(bad) > 3 else ""))


class GPT2Tokenizer(TextTokenizer):
    """MAX's TextTokenizer for GPT-2, refusing (InputError: a 400 with the reason) what the model cannot run."""

    def __init__(self, model_path: str, pipeline_config, **kwargs):
        super().__init__(model_path, pipeline_config, **kwargs)
        # The ids the model has a row of wte for (a stand-in's tokenizer knows fewer: their text is empty).
        self.vocab, self.n_positions = model_limits(model_path)
        self.echo_enabled = bool(getattr(getattr(pipeline_config, "model", None), "enable_echo", False))

    async def decode(self, encoded, **kwargs) -> str:
        """Token ids' text, as MAX's TextTokenizer decodes them; one id alone (a logprobs alternative, as
        MAX's server asks for it), its key: its text, or `bytes:\\xNN...` where that is not whole UTF-8."""
        if np.ndim(encoded) == 0:
            return token_key(self.delegate, int(encoded))
        return await super().decode(encoded, **kwargs)

    async def new_context(self, request):
        prompt = request.prompt
        if prompt is not None and not isinstance(prompt, str):
            if refused := ids_refused("prompt token ids", prompt, self.vocab):
                raise InputError(refused)
        if refused := ids_refused("stop_token_ids", request.sampling_params.stop_token_ids or [], self.vocab):
            raise InputError(refused)
        if request.echo and request.logprobs and not self.echo_enabled:
            raise InputError("echo with logprobs needs every prompt row's logits: start the server with "
                             "--enable-echo (pixi run serve does)")
        context = await super().new_context(request)
        if request.echo and request.logprobs:
            # Every prompt row's logits, none skipped: MAX's prefix cache would give this request the pages
            # of an earlier prompt's first tokens, and those rows no log-probabilities (an evaluation
            # harness scoring two answers after one long question). A salt of its own, no shared pages.
            context.cache_salt = f"echo-{request.request_id}"
        length = len(context.tokens.prompt)
        wanted = request.sampling_params.max_new_tokens
        if length == 0:
            raise InputError("the prompt is empty: GPT-2 needs at least one token to predict the next from "
                             "(OpenAI's models start an empty prompt with <|endoftext|>: send it, id 50256)")
        # One token after a prompt of the whole context (scoring it: max_tokens 0 generates one here) comes
        # from its last row: nothing past n_positions is embedded.
        room = self.n_positions + (wanted == 1)
        if length + (wanted or 1) > room:
            asked = f"{length} in the prompt" + (f" + {wanted} to generate (max_tokens)" if wanted else "")
            raise InputError(f"GPT-2's context is {self.n_positions} tokens (n_positions: it has no position "
                             f"embedding past it); this request needs {asked}: shorten the prompt or lower "
                             "max_tokens")
        return context
