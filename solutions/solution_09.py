"""Step 09 solution: a GPT-2 transformer block.

Attention (tokens exchange information), then the MLP (each token on its
own), each wrapped in a pre-norm residual step (step 08):

    x = x + attn(ln_1(x))
    x = x + mlp(ln_2(x))                                 [B, T, C] -> [B, T, C]

Names as in Hugging Face's GPT2Block, so `transformer.h.N.*` loads by name.
"""

from max.experimental.nn import Module
from max.experimental.tensor import Tensor

from solutions.solution_01 import GPT2Config
from solutions.solution_03 import LayerNorm
from solutions.solution_04 import GPT2MLP
from solutions.solution_07 import GPT2MultiHeadAttention
from solutions.solution_08 import residual_step


class GPT2Block(Module):
    def __init__(self, config: GPT2Config):
        self.ln_1 = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.attn = GPT2MultiHeadAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.mlp = GPT2MLP(config)

    def forward(self, hidden_states: Tensor) -> Tensor:
        """[B, T, C] -> [B, T, C]"""
        hidden_states = residual_step(hidden_states, self.ln_1, self.attn)
        return residual_step(hidden_states, self.ln_2, self.mlp)
