"""Step 03: layer normalization.

GPT-2 normalises each token's 768 numbers before attention and before the
MLP, so that every sub-layer reads numbers of a similar size whatever the
residual stream has grown to: each token's vector is shifted to mean 0 and
scaled to variance 1, then scaled and shifted again by two learned vectors,
`weight` (gamma) and `bias` (beta).

    x [..., C] -> [..., C], each of the leading positions normalised on its own

Facts you cannot guess: the variance is the biased one (it divides by C, not
C - 1); `eps` (1e-5) is added to the variance, under the square root; the
parameters are named `weight` and `bias`, as in GPT-2's checkpoint
(`h.0.ln_1.weight`).

Read: the book's page for this step (pixi run book-serve, then
http://127.0.0.1:8000/steps/03/; or book/docs/steps/03.md).
Check: pixi run s03        Stuck? pixi run s03 --hint
"""

from max.experimental import functional as F  # noqa: F401  (MAX's tensor operations)
from max.experimental.nn import Module
from max.experimental.tensor import Tensor


class LayerNorm(Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        # TODO: the two learned vectors, each with one number per channel ([dim]):
        #   self.weight starts as all ones, self.bias as all zeros (the checkpoint's
        #   values replace them when the weights load); keep eps for forward.
        self.weight = None
        self.bias = None
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        """[..., C] -> [..., C]"""
        # TODO: normalise over the last axis, then scale by weight and shift by bias.
        #   - Which axis holds one token's numbers?
        #   - Does a MAX reduction keep the reduced axis, so the result broadcasts back?
        #   - What happens to a token whose numbers are all almost equal, without eps?
        raise NotImplementedError("step 03: LayerNorm.forward")
