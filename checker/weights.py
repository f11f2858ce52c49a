"""`pixi run weights` (python -m checker.weights [--force]): fetches GPT-2 into weights/gpt2/
(checker.references.weights.download)."""

import sys

from checker.references.weights import download

if __name__ == "__main__":
    sys.exit(download(force="--force" in sys.argv[1:]))
