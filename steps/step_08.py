"""Step 08: residual connections around layer-normalised sub-layers.

Each half of a GPT-2 block reads a normalised copy of the residual stream and
adds its result back onto the stream ("pre-norm"). The stream itself is never
normalised on the way through the 12 blocks (only ln_f at the very end does
that), which is what lets the signal and its gradient pass through them.

    (hidden_states [B, T, C], ln, sublayer) -> [B, T, C]

In the block (step 09) this runs twice: with ln_1 and the attention, then
with ln_2 and the MLP. `ln` and `sublayer` are modules: call them.

Read: the book's page for this step (pixi run book-serve, then
http://127.0.0.1:8000/steps/08/; or book/docs/steps/08.md).
Check: pixi run s08        Stuck? pixi run s08 --hint
"""

from max.experimental.nn import Module
from max.experimental.tensor import Tensor


def residual_step(hidden_states: Tensor, ln: Module, sublayer: Module) -> Tensor:
    """One half of a block: the stream plus what the sub-layer makes of its normalised copy."""
    # TODO: which tensor goes into ln, which into the sub-layer, and which is added to the
    #   sub-layer's output? (The original Transformer normalised after the addition;
    #   GPT-2 does not.)
    raise NotImplementedError("step 08: residual_step")
