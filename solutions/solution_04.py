"""Step 04 solution: GPT-2's MLP (the feed-forward network).

After attention has mixed information between tokens, the MLP processes each
token on its own: widen 768 -> 3072, apply GELU, narrow 3072 -> 768.

    x [B, T, C] -> c_fc [B, T, 4C] -> GELU (tanh approximation) -> c_proj [B, T, C]

GPT-2 uses the tanh approximation of GELU (Hugging Face's "gelu_new"); the
exact erf GELU differs by up to ~1e-3 and the check can tell.
"""

from max.experimental import functional as F
from max.experimental.nn import Linear, Module
from max.experimental.tensor import Tensor

from solutions.solution_01 import GPT2Config


class GPT2MLP(Module):
    def __init__(self, config: GPT2Config):
        self.c_fc = Linear(config.n_embd, config.n_inner, bias=True)  # widen: C -> 4C
        self.c_proj = Linear(config.n_inner, config.n_embd, bias=True)  # narrow: 4C -> C

    def forward(self, hidden_states: Tensor) -> Tensor:
        """[B, T, C] -> [B, T, C]"""
        hidden_states = self.c_fc(hidden_states)  # [B, T, 4C]
        hidden_states = F.gelu(hidden_states, approximate="tanh")
        return self.c_proj(hidden_states)  # [B, T, C]
