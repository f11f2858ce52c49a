"""Step 10 to the online book's contract, with MAX 25.7's names: the body, its blocks in a Sequential."""

from max.experimental.tensor import Tensor
from max.nn.module_v3 import Embedding, Module, Sequential

from solutions.solution_01 import GPT2Config
from solutions.solution_08 import LayerNorm
from solutions.solution_09 import GPT2Block


class GPT2Model(Module):
    def __init__(self, config: GPT2Config):
        super().__init__()
        self.wte = Embedding(config.vocab_size, dim=config.n_embd)
        self.wpe = Embedding(config.n_positions, dim=config.n_embd)
        self.h = Sequential(*(GPT2Block(config) for _ in range(config.n_layer)))
        self.ln_f = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)

    def __call__(self, input_ids):
        _, seq_length = input_ids.shape
        positions = Tensor.arange(seq_length, dtype=input_ids.dtype, device=input_ids.device)
        return self.ln_f(self.h(self.wte(input_ids) + self.wpe(positions)))
