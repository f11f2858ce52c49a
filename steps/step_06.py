"""Step 06: position embeddings (Hugging Face's `wpe`).

Attention by itself does not know the order of the tokens. GPT-2 adds a
learned vector for each position 0..1023, looked up like the tokens' own.
When `past_length` tokens were already processed (generation with a cache),
the new tokens sit at positions past_length, past_length + 1, ...

    (seq_len, past_length) -> [T, C], added to the token embeddings [B, T, C]

Check: pixi run s06
"""

from max.dtype import DType  # noqa: F401  (positions are int64)
from max.experimental import functional as F  # noqa: F401
from max.experimental.nn import Module
from max.experimental.tensor import Tensor

from steps.step_01 import GPT2Config


class GPT2PositionEmbedding(Module):
    def __init__(self, config: GPT2Config):
        # TODO: the table, named `weight`: one row per position, [n_positions, n_embd].
        self.weight = None

    def forward(self, seq_len: int, past_length: int = 0) -> Tensor:
        """-> [T, C]: the embeddings of positions past_length .. past_length + seq_len - 1"""
        # TODO: 1. the positions as int64 on the table's device:
        #          Tensor.arange(start, stop, dtype=DType.int64, device=self.weight.device)
        # TODO: 2. their rows of the table (as in step 05)
        raise NotImplementedError("step 06: GPT2PositionEmbedding.forward")
