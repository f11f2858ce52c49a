"""Step 04, written differently: GELU's tanh approximation written out.
Correct: the check must pass it."""

import math

from max.experimental import functional as F
from max.experimental.nn import Linear, Module


class GPT2MLP(Module):
    def __init__(self, config):
        self.c_fc = Linear(config.n_embd, 4 * config.n_embd)
        self.c_proj = Linear(4 * config.n_embd, config.n_embd)

    def forward(self, x):
        h = self.c_fc(x)
        h = 0.5 * h * (1.0 + F.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h * h * h)))
        return self.c_proj(h)
