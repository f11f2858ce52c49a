"""Step 02: the causal mask.

GPT-2 predicts each token from the tokens before it, so a query at position
`i` may attend to keys at positions `0..i` and never to a later one. The mask
is *added* to the attention scores before softmax: 0 where attending is
allowed, -inf where it is not, so that softmax gives those keys exactly zero
weight.

With `num_tokens` earlier tokens already cached (when generating), the
`sequence_length` new queries come after them: query `i` may see keys
`0..num_tokens + i`, and the mask has one column per key, cached and new.

    (sequence_length T, num_tokens N) -> [T, N + T], float, 0 or -inf

The lengths may be Python ints or MAX `Dim`s: `pixi run gpt2` compiles your
model for any length, and then the length is a symbol, not a number.

Read: the book's page for this step (pixi run book-serve, then
http://127.0.0.1:8000/steps/02/; or book/docs/steps/02.md).
Check: pixi run s02        Stuck? pixi run s02 --hint
"""

from max.driver import Device
from max.dtype import DType
from max.experimental import functional as F  # noqa: F401  (MAX's tensor operations)
from max.experimental.tensor import Tensor
from max.graph import Dim, DimLike  # noqa: F401  (a length that may be symbolic)


def causal_mask(
    sequence_length: DimLike,
    num_tokens: DimLike,
    *,
    dtype: DType,
    device: Device,
) -> Tensor:
    """Returns the additive causal mask, shape [sequence_length, num_tokens + sequence_length]."""
    # TODO: build the [T, N + T] mask of the docstring, in `dtype` on `device`.
    #   - How many columns (keys) does it have, and how do you add a Dim and an int?
    #   - Row i, column j: which (i, j) are allowed? Draw it for T = 3, N = 2.
    #   - The allowed entries form a band of diagonals: can one MAX op keep a band and
    #     set everything else? (a mask built by comparing a column of positions with a
    #     row of them is right op by op but MAX 26.7 compiles it wrongly: the check shows it)
    raise NotImplementedError("step 02: causal_mask")
