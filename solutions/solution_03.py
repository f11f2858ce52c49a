"""Step 03 solution: layer normalization.

GPT-2 normalises each token's 768 numbers before attention and before the
MLP: subtract their mean, divide by their standard deviation, then scale and
shift with learned `weight` (gamma) and `bias` (beta):

    y = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias      over the last axis

`var` is the biased variance (divide by n, not n - 1). Hugging Face names the
parameters `weight` and `bias`, so `ln_1.weight` loads by name.
"""

from max.experimental import functional as F
from max.experimental.nn import Module
from max.experimental.tensor import Tensor


class LayerNorm(Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        self.weight = Tensor.ones([dim])  # gamma, [C]
        self.bias = Tensor.zeros([dim])  # beta, [C]
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        """[..., C] -> [..., C]"""
        mean = x.mean(axis=-1)  # [..., 1]: reductions keep the axis
        centered = x - mean
        var = (centered * centered).mean(axis=-1)  # biased: divides by C
        return centered / F.sqrt(var + self.eps) * self.weight + self.bias
        # MAX also has it as one op: F.layer_norm(x, gamma=self.weight, beta=self.bias, epsilon=self.eps)
