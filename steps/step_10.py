"""Step 10: the GPT-2 model body (Hugging Face's GPT2Model, `transformer`).

Token ids in, one 768-number vector per token out: the token embeddings plus
the embeddings of positions 0..T-1, then the 12 blocks in order, then a final
LayerNorm (`ln_f`), once.

    input_ids [B, T] -> [B, T, C]

Use Hugging Face's names (`wte`, `wpe`, `h`, `ln_f`) so GPT-2's
`transformer.*` weights load by name: the blocks are `h.0` .. `h.11`, which
is how a list of modules names its children. Uses your steps 03, 05, 06 and 09.

Read: the book's page for this step (pixi run book-serve, then
http://127.0.0.1:8000/steps/10/; or book/docs/steps/10.md).
Check: pixi run s10        Stuck? pixi run s10 --hint
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
        # TODO: the token table, the position table, the n_layer blocks (in a list of
        #   modules, so that the checkpoint's h.0 .. h.11 find them) and the final LayerNorm.
        self.wte = None
        self.wpe = None
        self.h = None
        self.ln_f = None

    def forward(self, input_ids: Tensor) -> Tensor:
        """[B, T] token ids -> [B, T, C]"""
        # TODO: embeddings, every block in turn, ln_f.
        #   - Where do you read T? (compiled, it is a Dim: pass it on as it is)
        #   - [B, T, C] + [T, C]: what does broadcasting do with the batch axis?
        raise NotImplementedError("step 10: GPT2Model.forward")
