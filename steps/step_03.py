"""Step 03: layer normalization.

GPT-2 normalises each token's 768 numbers before attention and before the
MLP: subtract their mean, divide by their standard deviation, then scale and
shift with learned `weight` (gamma) and `bias` (beta):

    y = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias      over the last axis

Check: pixi run s03
"""

from max.experimental import functional as F  # noqa: F401  (F.layer_norm, or build it from F.mean, F.sqrt...)
from max.experimental.nn import Module
from max.experimental.tensor import Tensor


class LayerNorm(Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        # TODO: the learned parameters, named as in Hugging Face's checkpoint:
        #   self.weight: [dim], starts at ones   Hint: Tensor.ones([dim])
        #   self.bias:   [dim], starts at zeros
        #   and keep eps for forward
        self.weight = None
        self.bias = None
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        """[..., C] -> [..., C]"""
        # TODO: normalise over the last axis, then scale by weight and shift by bias.
        # Hint: F.layer_norm(x, gamma=..., beta=..., epsilon=...) does it in one op;
        # or write it out: the variance divides by n (not n - 1), eps goes inside the sqrt.
        raise NotImplementedError("step 03: LayerNorm.forward")
