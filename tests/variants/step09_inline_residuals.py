"""Step 09, written differently: the residuals written inline, no step-08 helper.
Correct: the check must pass it."""

from max.experimental.nn import Module

from solutions.solution_03 import LayerNorm
from solutions.solution_04 import GPT2MLP
from solutions.solution_07 import GPT2MultiHeadAttention


class GPT2Block(Module):
    def __init__(self, config):
        self.ln_1 = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.attn = GPT2MultiHeadAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.mlp = GPT2MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))
