"""Step 05: token embeddings (Hugging Face's `wte`).

GPT-2 turns each token id into a vector of 768 numbers by looking up one row
of a learned table, [vocab_size, n_embd]: token 464 gets row 464. Nothing is
multiplied or scaled on the way.

    input_ids [B, T] (int64) -> [B, T, C]

The table is named `weight`, so that inside the model (`self.wte = ...`)
GPT-2's `transformer.wte.weight` loads by name.

Read: the book's page for this step (pixi run book-serve, then
http://127.0.0.1:8000/steps/05/; or book/docs/steps/05.md).
Check: pixi run s05        Stuck? pixi run s05 --hint
"""

from max.experimental import functional as F  # noqa: F401  (MAX's tensor operations)
from max.experimental.nn import Module
from max.experimental.tensor import Tensor

from steps.step_01 import GPT2Config


class GPT2TokenEmbedding(Module):
    def __init__(self, config: GPT2Config):
        # TODO: the table: one row per token, one column per channel, any values
        # (the checkpoint's replace them when the weights load).
        self.weight = None

    def forward(self, input_ids: Tensor) -> Tensor:
        """[B, T] token ids -> [B, T, C]"""
        # TODO: the row of the table for every id, keeping the ids' [B, T] layout.
        #   Is there one MAX op that picks rows by index along an axis?
        raise NotImplementedError("step 05: GPT2TokenEmbedding.forward")
