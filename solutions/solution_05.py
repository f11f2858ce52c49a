"""Step 05 solution: token embeddings (Hugging Face's `wte`).

GPT-2 turns each token id into a vector of 768 numbers by looking up one row
of a learned table, [vocab_size, n_embd]: token 464 gets row 464.

    input_ids [B, T] (int64) -> [B, T, C]

The table is named `weight`, so inside the model (`self.wte = ...`) GPT-2's
`transformer.wte.weight` loads by name.
"""

from max.experimental import functional as F
from max.experimental.nn import Module
from max.experimental.tensor import Tensor

from solutions.solution_01 import GPT2Config


class GPT2TokenEmbedding(Module):
    def __init__(self, config: GPT2Config):
        self.weight = Tensor.zeros([config.vocab_size, config.n_embd])  # one row per token

    def forward(self, input_ids: Tensor) -> Tensor:
        """[B, T] token ids -> [B, T, C]"""
        return F.gather(self.weight, input_ids, axis=0)  # row input_ids[b, t] for each (b, t)
