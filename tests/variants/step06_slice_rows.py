"""Step 06, written differently: a slice of the table's rows instead of a gather.
Correct: the check must pass it."""

from max.experimental.nn import Module
from max.experimental.tensor import Tensor


class GPT2PositionEmbedding(Module):
    def __init__(self, config):
        self.weight = Tensor.zeros([config.n_positions, config.n_embd])

    def forward(self, seq_len, past_length=0):
        return self.weight[past_length : past_length + seq_len]
