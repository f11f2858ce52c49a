"""A checkpoint's tokenizer: `tokenizer.json` beside its weights (the real GPT-2's, or a stand-in's).

    tokenizer_of(checkpoint).encode("text").ids -> [int]; .decode(ids) -> str
"""

from __future__ import annotations

from runtime.checkpoints import Checkpoint

# tokenizers is imported inside the functions that use it: importing it takes seconds.


def tokenizer_of(checkpoint: Checkpoint):
    """The checkpoint's `tokenizers.Tokenizer`."""
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(checkpoint.path / "tokenizer.json"))
