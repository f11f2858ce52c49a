"""Step 03, written differently: MAX's fused layer_norm op. Correct: the check must pass it."""

from max.experimental import functional as F
from max.experimental.nn import Module
from max.experimental.tensor import Tensor


class LayerNorm(Module):
    def __init__(self, dim, eps=1e-5):
        self.weight = Tensor.ones([dim])
        self.bias = Tensor.zeros([dim])
        self.eps = eps

    def forward(self, x):
        return F.layer_norm(x, gamma=self.weight, beta=self.bias, epsilon=self.eps)
