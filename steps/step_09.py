"""Step 09: a GPT-2 transformer block.

Attention (tokens exchange information), then the MLP (each token on its
own), each wrapped in a pre-norm residual step (step 08):

    x = x + attn(ln_1(x))
    x = x + mlp(ln_2(x))                                 [B, T, C] -> [B, T, C]

Use Hugging Face's names (`ln_1`, `attn`, `ln_2`, `mlp`) so GPT-2's
`transformer.h.N.*` weights load by name. This step uses your steps 03, 04,
07 and 08; its check runs theirs first.

Check: pixi run s09
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
        # TODO: the four sub-modules, with GPT-2's names:
        #   self.ln_1 = LayerNorm(n_embd, eps=layer_norm_epsilon)   before attention
        #   self.attn = GPT2MultiHeadAttention(config)
        #   self.ln_2 = LayerNorm(...)                              before the MLP
        #   self.mlp  = GPT2MLP(config)
        self.ln_1 = None
        self.attn = None
        self.ln_2 = None
        self.mlp = None

    def forward(self, hidden_states: Tensor) -> Tensor:
        """[B, T, C] -> [B, T, C]"""
        # TODO: two residual steps: attention with ln_1, then the MLP with ln_2.
        raise NotImplementedError("step 09: GPT2Block.forward")
