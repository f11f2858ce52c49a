"""pixi run serve: your GPT-2 (steps/step_14.py and the steps it uses) behind `max serve`, on 127.0.0.1.

    pixi run serve                  your steps, on the real GPT-2 if downloaded, else the stand-in
    pixi run serve --fast           steps/step_18.py: your paged FlashAttention and batched int8 products
    pixi run serve --solutions      the course's solutions
    pixi run serve --port 8000      a port of your choice (default: a free one)
    pixi run serve --pool 8192      the paged cache holds 8192 positions, shared by every request
                                    (default: 16 requests x 1024; at least 1024)

Prints the URL and a curl line once the server is ready; Ctrl-C, or a `kill` of this process, stops it
(and everything it started).
"""

from __future__ import annotations

import argparse
import sys

import runtime
from runtime.checkpoints import find_checkpoint
from runtime.paths import shown, step_file
from runtime.server import MODEL, Server, ServerError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pixi run serve", description=__doc__.splitlines()[0])
    parser.add_argument("--solutions", action="store_true", help="serve the course's solutions instead of your steps")
    parser.add_argument("--fast", action="store_true", help="serve step 18 (your kernels) instead of step 14")
    parser.add_argument("--port", type=int, default=None, help="the port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--pool", type=int, default=None, metavar="POSITIONS",
                        help="positions the paged cache holds, shared by every request (default: 16 x 1024)")
    args = parser.parse_args(argv)
    runtime.setup()
    step = "18" if args.fast else "14"
    path = step_file(step, solution=args.solutions)
    checkpoint = find_checkpoint()
    if args.pool is not None and args.pool < (longest := checkpoint.config()["n_positions"]):
        parser.error(f"--pool {args.pool}: the pool must hold one request of n_positions, {longest} positions")
    print(f"Weights: {checkpoint.describe()}")
    if checkpoint.kind in ("synthetic", "scale"):
        print("(a stand-in's random weights: the text is gibberish, as in pixi run gpt2; its ids are what is checked)")
    print(f"Serving {shown(path)} with max serve...", flush=True)
    try:
        with Server(path, checkpoint.path, port=args.port, pool_positions=args.pool) as server:
            print(f"\nYour GPT-2 answers at {server.url}/v1 (OpenAI API; model name {MODEL!r}). Try:\n")
            print(f"  curl {server.url}/v1/completions -H 'Content-Type: application/json' \\\n"
                  f"    -d '{{\"model\": \"{MODEL}\", \"prompt\": \"Hello, I am\", \"max_tokens\": 16, "
                  f"\"temperature\": 0}}'\n")
            print("Ctrl-C stops the server. A request it refuses is shown here, with the reason "
                  f"(the whole log: {shown(server.log)}).", flush=True)
            while server.process.poll() is None and not server.signalled.wait(0.5):
                for reason in server.refusals():
                    print(f"refused (400): {reason}", file=sys.stderr, flush=True)
            if server.signalled.is_set():  # a signal whose exception a finalizer swallowed
                raise KeyboardInterrupt
            if server.process.poll() is not None:
                print(f"max serve stopped (exit code {server.process.returncode}):\n{server.tail()}", file=sys.stderr)
                return 1
    except ServerError as e:
        print(f"max serve of {shown(path)} did not start: {e}", file=sys.stderr)
        print(f"Does pixi run s{step} pass? It checks the same model, with messages that say what is wrong.",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nStopped.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
