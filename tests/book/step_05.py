"""Step 05 to the online book's contract, with MAX 26.1's names: GPT2Embeddings holds wte."""

from max.nn import Embedding, Module

from solutions.solution_01 import GPT2Config


class GPT2Embeddings(Module):
    def __init__(self, config: GPT2Config):
        super().__init__()
        self.wte = Embedding(config.vocab_size, dim=config.n_embd)

    def __call__(self, input_ids):
        return self.wte(input_ids)
