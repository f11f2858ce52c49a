"""Step 06: position embeddings (Hugging Face's `wpe`).

Attention by itself does not know the order of the tokens. GPT-2 adds a
learned vector for each position 0..1023, looked up like the tokens' own.
When `past_length` tokens were already processed (generation with a cache),
the new tokens sit at positions past_length, past_length + 1, ...

    (seq_len T, past_length P) -> [T, C]: the rows of positions P .. P + T - 1,
    added to the token embeddings [B, T, C] (they broadcast over the batch)

`seq_len` may be a Python int or a MAX `Dim` (a symbol, when `pixi run gpt2`
compiles your model for any length). The table is named `weight`.

Read: the book's page for this step (pixi run book-serve, then
http://127.0.0.1:8000/steps/06/; or book/docs/steps/06.md).
Check: pixi run s06        Stuck? pixi run s06 --hint
"""

from max.dtype import DType  # noqa: F401  (indices are int64)
from max.experimental import functional as F  # noqa: F401  (MAX's tensor operations)
from max.experimental.nn import Module
from max.experimental.tensor import Tensor

from steps.step_01 import GPT2Config


class GPT2PositionEmbedding(Module):
    def __init__(self, config: GPT2Config):
        # TODO: the table: one row per position GPT-2 can attend over.
        self.weight = None

    def forward(self, seq_len: int, past_length: int = 0) -> Tensor:
        """-> [T, C]: the embeddings of positions past_length .. past_length + seq_len - 1"""
        # TODO: make the positions as a tensor of int64 indices on the table's device,
        #   then take their rows, as step 05 takes the tokens'.
        #   Where does the range start and where does it stop (is the stop included)?
        raise NotImplementedError("step 06: GPT2PositionEmbedding.forward")
