"""Step 10, written differently: the blocks in a Sequential, called as one.
Correct: the check must pass it."""

from max.experimental.nn import Module, Sequential

from solutions.solution_03 import LayerNorm
from solutions.solution_05 import GPT2TokenEmbedding
from solutions.solution_06 import GPT2PositionEmbedding
from solutions.solution_09 import GPT2Block


class GPT2Model(Module):
    def __init__(self, config):
        self.wte = GPT2TokenEmbedding(config)
        self.wpe = GPT2PositionEmbedding(config)
        self.h = Sequential(*[GPT2Block(config) for _ in range(config.n_layer)])
        self.ln_f = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)

    def forward(self, input_ids):
        positions = self.wpe(input_ids.shape[1], past_length=0)
        return self.ln_f(self.h(self.wte(input_ids) + positions))
