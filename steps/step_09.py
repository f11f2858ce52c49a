"""Step 09: a GPT-2 transformer block.

Attention (tokens exchange information), then the MLP (each token on its
own), each wrapped in a pre-norm residual step (step 08): the MLP half reads
the stream after the attention half has added to it.

    hidden_states [B, T, C] -> attention half -> MLP half -> [B, T, C]

Use Hugging Face's names (`ln_1`, `attn`, `ln_2`, `mlp`) so GPT-2's
`transformer.h.N.*` weights load by name: ln_1 belongs to the attention
half, ln_2 to the MLP half. This step uses your steps 03, 04, 07 and 08; its
check runs theirs first.

Read: the book's page for this step (pixi run book-serve, then
http://127.0.0.1:8000/steps/09/; or book/docs/steps/09.md).
Check: pixi run s09        Stuck? pixi run s09 --hint
"""

from max.experimental.nn import Module
from max.experimental.tensor import Tensor

from steps.step_01 import GPT2Config
from steps.step_03 import LayerNorm  # noqa: F401
from steps.step_04 import GPT2MLP  # noqa: F401
from steps.step_07 import GPT2MultiHeadAttention  # noqa: F401
from steps.step_08 import residual_step  # noqa: F401


class GPT2Block(Module):
    def __init__(self, config: GPT2Config):
        # TODO: the four sub-modules, built from the config (the LayerNorms need the width
        #   and GPT-2's epsilon).
        self.ln_1 = None
        self.attn = None
        self.ln_2 = None
        self.mlp = None

    def forward(self, hidden_states: Tensor) -> Tensor:
        """[B, T, C] -> [B, T, C]"""
        # TODO: the two halves, in order. What does the second half read?
        raise NotImplementedError("step 09: GPT2Block.forward")
