"""`pixi run weights` (python -m checker.weights [--force]): fetches GPT-2 into weights/gpt2/ from the
Hugging Face hub, with a progress bar, and verifies it (runtime.checkpoints.download)."""

import argparse
import sys

from runtime.checkpoints import download


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m checker.weights", description=__doc__.split("\n\n")[0])
    parser.add_argument("--force", action="store_true", help="fetch every file again, even the ones already here")
    args = parser.parse_args(argv)

    return download(force=args.force)


if __name__ == "__main__":
    sys.exit(main())
