"""Step 02 to the online book's contract, with MAX 25.7's names: the additive causal mask.

Written with the cached tokens counted (the book's own hint, num_upper=0, ignores them).
"""

from max.driver import Device
from max.dtype import DType
from max.experimental import functional as F
from max.experimental.tensor import Tensor
from max.graph import Dim, DimLike


@F.functional
def causal_mask(sequence_length: DimLike, num_tokens: DimLike, *, dtype: DType, device: Device):
    n = Dim(sequence_length) + num_tokens
    mask = Tensor.constant(float("-inf"), dtype=dtype, device=device)
    mask = F.broadcast_to(mask, shape=(sequence_length, n))
    return F.band_part(mask, num_lower=None, num_upper=num_tokens, exclude=True)
