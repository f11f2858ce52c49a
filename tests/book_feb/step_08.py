"""Step 08 of the online book's February 2026 layout, with MAX 26.1's names: the body and a
bias-free lm_head (the book loads the weights in step 11's run_model, not here)."""

from max.nn import Linear, Module
from max.tensor import Tensor
from step_01 import GPT2Config
from step_07 import MaxGPT2Model


class MaxGPT2LMHeadModel(Module):
    def __init__(self, config: GPT2Config) -> None:
        super().__init__()
        self.config = config
        self.transformer = MaxGPT2Model(config)
        self.lm_head = Linear(config.n_embd, config.vocab_size, bias=False)

    def forward(self, input_ids: Tensor) -> Tensor:
        hidden_states = self.transformer(input_ids)
        return self.lm_head(hidden_states)
