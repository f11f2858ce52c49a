"""Step 10 solution: the GPT-2 model body (Hugging Face's GPT2Model, `transformer`).

Token ids in, one 768-number vector per token out:

    input_ids [B, T] -> wte [B, T, C] + wpe [T, C] -> 12 x GPT2Block -> ln_f -> [B, T, C]

The names (`wte`, `wpe`, `h.0` ... `h.11`, `ln_f`) are Hugging Face's, so
GPT-2's `transformer.*` weights load by name.
"""

from max.experimental.nn import Module, ModuleList
from max.experimental.tensor import Tensor

from solutions.solution_01 import GPT2Config
from solutions.solution_03 import LayerNorm
from solutions.solution_05 import GPT2TokenEmbedding
from solutions.solution_06 import GPT2PositionEmbedding
from solutions.solution_09 import GPT2Block


class GPT2Model(Module):
    def __init__(self, config: GPT2Config):
        self.wte = GPT2TokenEmbedding(config)
        self.wpe = GPT2PositionEmbedding(config)
        self.h = ModuleList(GPT2Block(config) for _ in range(config.n_layer))
        self.ln_f = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)

    def forward(self, input_ids: Tensor) -> Tensor:
        """[B, T] token ids -> [B, T, C]"""
        seq_len = input_ids.shape[-1]
        hidden_states = self.wte(input_ids) + self.wpe(seq_len)  # [B, T, C] + [T, C]
        for block in self.h:
            hidden_states = block(hidden_states)
        return self.ln_f(hidden_states)
