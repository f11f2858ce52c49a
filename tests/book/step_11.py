"""Step 11 to the online book's contract, with MAX 26.1's names: the body and a bias-free lm_head
(the book loads the weights in its main.py, not in this step)."""

from max.nn import Linear, Module

from solutions.solution_01 import GPT2Config
from solutions.solution_10 import GPT2Model


class MaxGPT2LMHeadModel(Module):
    def __init__(self, config: GPT2Config):
        super().__init__()
        self.config = config
        self.transformer = GPT2Model(config)
        self.lm_head = Linear(config.n_embd, config.vocab_size, bias=False)

    def __call__(self, input_ids):
        return self.lm_head(self.transformer(input_ids))
