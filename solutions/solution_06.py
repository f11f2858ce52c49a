"""Step 06 solution: position embeddings (Hugging Face's `wpe`).

Attention by itself does not know the order of the tokens. GPT-2 adds a
learned vector for each position 0..1023, looked up like the tokens' own.
When `past_length` tokens were already processed (generation with a cache),
the new tokens sit at positions past_length, past_length + 1, ...

    (seq_len, past_length) -> [T, C], added to the token embeddings [B, T, C]
"""

from max.dtype import DType
from max.experimental import functional as F
from max.experimental.nn import Module
from max.experimental.tensor import Tensor

from solutions.solution_01 import GPT2Config


class GPT2PositionEmbedding(Module):
    def __init__(self, config: GPT2Config):
        self.weight = Tensor.zeros([config.n_positions, config.n_embd])  # one row per position

    def forward(self, seq_len: int, past_length: int = 0) -> Tensor:
        """-> [T, C]: the embeddings of positions past_length .. past_length + seq_len - 1"""
        positions = Tensor.arange(past_length, past_length + seq_len, dtype=DType.int64, device=self.weight.device)
        return F.gather(self.weight, positions, axis=0)
