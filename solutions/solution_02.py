"""Step 02 solution: the causal mask.

GPT-2 predicts each token from the tokens before it, so position `i` may
attend to positions `0..i` and never to a later one. The mask is added to the
attention scores before softmax: 0 where attending is allowed, -inf where it
is not, so softmax gives those positions exactly zero weight.

With a cache of `num_tokens` earlier tokens (used when generating), the
`sequence_length` new queries sit after them: query `i` sees keys
`0..num_tokens + i`.
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
    total = Dim(sequence_length) + num_tokens
    mask = Tensor(float("-inf"), dtype=dtype, device=device)
    mask = F.broadcast_to(mask, [sequence_length, total])  # [T, N+T], all -inf
    # Zero the band where key <= num_tokens + query: everything on or below the
    # diagonal that starts `num_tokens` columns to the right.
    return F.band_part(mask, num_lower=None, num_upper=num_tokens, exclude=True)
