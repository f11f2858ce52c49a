"""Step 02: the causal mask.

GPT-2 predicts each token from the tokens before it, so position `i` may
attend to positions `0..i` and never to a later one. The mask is added to the
attention scores before softmax: 0 where attending is allowed, -inf where it
is not, so softmax gives those positions exactly zero weight.

With `num_tokens` earlier tokens already cached (used when generating), the
`sequence_length` new queries come after them: query `i` may see keys
`0..num_tokens + i`.

Check: pixi run s02
"""

from max.driver import Device
from max.dtype import DType
from max.experimental import functional as F
from max.experimental.tensor import Tensor
from max.graph import Dim, DimLike


def causal_mask(
    sequence_length: DimLike,
    num_tokens: DimLike,
    *,
    dtype: DType,
    device: Device,
) -> Tensor:
    """Returns the additive causal mask, shape [sequence_length, num_tokens + sequence_length]."""
    # TODO: 1. total = Dim(sequence_length) + num_tokens (keys: cached + new)
    # TODO: 2. a [sequence_length, total] tensor full of -inf:
    #          Tensor(float("-inf"), dtype=dtype, device=device), then F.broadcast_to
    # TODO: 3. zero the allowed band (key <= num_tokens + query) with
    #          F.band_part(mask, num_lower=None, num_upper=num_tokens, exclude=True)
    raise NotImplementedError("step 02: causal_mask")
