"""Step 08 solution: residual connections around layer-normalised sub-layers.

Each half of a GPT-2 block reads a normalised copy of the residual stream and
adds its result back onto the stream ("pre-norm"):

    hidden_states + sublayer(ln(hidden_states))        [B, T, C] -> [B, T, C]

The stream itself is never normalised along the way, which is what lets the
signal pass through 12 blocks; only the final ln_f normalises it.
"""

from max.experimental.nn import Module
from max.experimental.tensor import Tensor


def residual_step(hidden_states: Tensor, ln: Module, sublayer: Module) -> Tensor:
    """One half of a block: the stream plus the sub-layer's output on its normalised copy."""
    residual = hidden_states
    return residual + sublayer(ln(hidden_states))
