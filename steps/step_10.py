"""Step 10: the GPT-2 model body (Hugging Face's GPT2Model, `transformer`).

Token ids in, one 768-number vector per token out:

    input_ids [B, T] -> wte [B, T, C] + wpe [T, C] -> 12 x GPT2Block -> ln_f -> [B, T, C]

Use Hugging Face's names (`wte`, `wpe`, `h`, `ln_f`) so GPT-2's
`transformer.*` weights load by name. Uses your steps 03, 05, 06 and 09.

Check: pixi run s10
"""

from max.experimental.nn import Module, ModuleList  # noqa: F401
from max.experimental.tensor import Tensor

from steps.step_01 import GPT2Config
from steps.step_03 import LayerNorm  # noqa: F401
from steps.step_05 import GPT2TokenEmbedding  # noqa: F401
from steps.step_06 import GPT2PositionEmbedding  # noqa: F401
from steps.step_09 import GPT2Block  # noqa: F401


class GPT2Model(Module):
    def __init__(self, config: GPT2Config):
        # TODO: self.wte (step 05), self.wpe (step 06),
        #       self.h: n_layer GPT2Blocks in a ModuleList (its children are named h.0, h.1, ...),
        #       self.ln_f: the final LayerNorm
        self.wte = None
        self.wpe = None
        self.h = None
        self.ln_f = None

    def forward(self, input_ids: Tensor) -> Tensor:
        """[B, T] token ids -> [B, T, C]"""
        # TODO: 1. token embeddings plus the position embeddings of positions 0..T-1
        #          (T is input_ids.shape[-1]; [T, C] broadcasts over the batch)
        # TODO: 2. each block in turn
        # TODO: 3. ln_f
        raise NotImplementedError("step 10: GPT2Model.forward")
