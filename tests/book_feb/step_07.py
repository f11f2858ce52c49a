"""Step 07 of the online book's February 2026 layout, with the names of its 24 February pages:
the body, MaxGPT2Model, its blocks in a Sequential."""

from max.experimental.tensor import Tensor
from max.nn.module_v3 import Embedding, Module, Sequential
from step_01 import GPT2Config
from step_05 import LayerNorm
from step_06 import GPT2Block


class MaxGPT2Model(Module):
    def __init__(self, config: GPT2Config) -> None:
        super().__init__()
        self.wte = Embedding(config.vocab_size, dim=config.n_embd)
        self.wpe = Embedding(config.n_positions, dim=config.n_embd)
        self.h = Sequential(*(GPT2Block(config) for _ in range(config.n_layer)))
        self.ln_f = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)

    def forward(self, input_ids: Tensor) -> Tensor:
        _, seq_length = input_ids.shape
        tok_embeds = self.wte(input_ids)
        pos_embeds = self.wpe(Tensor.arange(seq_length, dtype=input_ids.dtype, device=input_ids.device))
        x = tok_embeds + pos_embeds
        x = self.h(x)
        return self.ln_f(x)
