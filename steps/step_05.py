"""Step 05: token embeddings (Hugging Face's `wte`).

GPT-2 turns each token id into a vector of 768 numbers by looking up one row
of a learned table, [vocab_size, n_embd]: token 464 gets row 464.

    input_ids [B, T] (int64) -> [B, T, C]

Check: pixi run s05
"""

from max.experimental import functional as F  # noqa: F401  (F.gather)
from max.experimental.nn import Module
from max.experimental.tensor import Tensor

from steps.step_01 import GPT2Config


class GPT2TokenEmbedding(Module):
    def __init__(self, config: GPT2Config):
        # TODO: the table, named `weight` as in GPT-2's checkpoint: one row per token,
        # [vocab_size, n_embd]. Hint: Tensor.zeros([rows, columns]); the real values are loaded later.
        self.weight = None

    def forward(self, input_ids: Tensor) -> Tensor:
        """[B, T] token ids -> [B, T, C]"""
        # TODO: pick row input_ids[b, t] of the table for every (b, t).
        # Hint: F.gather(table, indices, axis=0)
        raise NotImplementedError("step 05: GPT2TokenEmbedding.forward")
