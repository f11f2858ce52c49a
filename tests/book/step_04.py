"""Step 04 to the online book's contract, with MAX 25.7's names: GPT2MLP(intermediate_size, config)."""

from max.experimental import functional as F
from max.nn.module_v3 import Linear, Module

from solutions.solution_01 import GPT2Config


class GPT2MLP(Module):
    def __init__(self, intermediate_size: int, config: GPT2Config):
        super().__init__()
        self.c_fc = Linear(config.n_embd, intermediate_size, bias=True)
        self.c_proj = Linear(intermediate_size, config.n_embd, bias=True)

    def __call__(self, hidden_states):
        return self.c_proj(F.gelu(self.c_fc(hidden_states), approximate="tanh"))
