"""Step 08 to the online book's contract, with MAX 25.7's names: LayerNorm again (step 09 imports it
from here), a ResidualBlock and apply_residual_connection."""

from max.experimental import functional as F
from max.experimental.tensor import Tensor
from max.graph import DimLike
from max.nn.module_v3 import Module


class LayerNorm(Module):
    def __init__(self, dim: DimLike, *, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = Tensor.ones([dim])
        self.bias = Tensor.zeros([dim])

    def __call__(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, gamma=self.weight, beta=self.bias, epsilon=self.eps)


class ResidualBlock(Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.ln = LayerNorm(dim, eps=eps)

    def __call__(self, x: Tensor, sublayer_output: Tensor) -> Tensor:
        return apply_residual_connection(x, sublayer_output)


def apply_residual_connection(input_tensor: Tensor, sublayer_output: Tensor) -> Tensor:
    return input_tensor + sublayer_output
