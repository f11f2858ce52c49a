"""Step 06 to the online book's contract, with MAX 25.7's names: GPT2PositionEmbeddings holds wpe
and is called with the position ids."""

from max.nn.module_v3 import Embedding, Module

from solutions.solution_01 import GPT2Config


class GPT2PositionEmbeddings(Module):
    def __init__(self, config: GPT2Config):
        super().__init__()
        self.wpe = Embedding(config.n_positions, dim=config.n_embd)

    def __call__(self, position_ids):
        return self.wpe(position_ids)
