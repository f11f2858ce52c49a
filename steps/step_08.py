"""Step 08: residual connections around layer-normalised sub-layers.

Each half of a GPT-2 block reads a normalised copy of the residual stream and
adds its result back onto the stream ("pre-norm"):

    hidden_states + sublayer(ln(hidden_states))        [B, T, C] -> [B, T, C]

In the block (step 09) this runs twice: with ln_1 and the attention, then
with ln_2 and the MLP.

Check: pixi run s08
"""

from max.experimental.nn import Module
from max.experimental.tensor import Tensor


def residual_step(hidden_states: Tensor, ln: Module, sublayer: Module) -> Tensor:
    """One half of a block: the stream plus the sub-layer's output on its normalised copy."""
    # TODO: keep the stream (the residual), run the sub-layer on ln(stream), add the two.
    # Hint: the stream that is added back is the one *before* ln.
    raise NotImplementedError("step 08: residual_step")
