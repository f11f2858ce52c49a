"""Step 03, written differently: var = E[x^2] - E[x]^2 and a multiply by rsqrt.
Correct: the check must pass it."""

from max.experimental import functional as F
from max.experimental.nn import Module
from max.experimental.tensor import Tensor


class LayerNorm(Module):
    def __init__(self, dim, eps=1e-5):
        self.weight = Tensor.ones([dim])
        self.bias = Tensor.zeros([dim])
        self.eps = eps

    def forward(self, x):
        mean = F.mean(x, axis=-1)
        var = F.mean(x * x, axis=-1) - mean * mean
        return (x - mean) * F.rsqrt(var + self.eps) * self.weight + self.bias
