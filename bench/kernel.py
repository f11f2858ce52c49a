"""A matrix-vector kernel written in Mojo, tried in place of MAX's products in decode (`python -m bench.tried`).

    matvec(x [N, K], w [M, K]) -> [N, M] = x @ w.T
    matvec_bias(x [N, K], w [M, K], b [M]) -> [N, M] = x @ w.T + b

bench/kernels/matvec/__init__.mojo registers them as the custom ops `matvec_t` and `matvec_bias_t`:
each of 8 tasks takes a band of w's rows and streams it once, four rows at a time against one load
of x, 16 floats per SIMD operation. It is written for decode (N = 1); a prompt of N positions would
read w's rows N times. MAX compiles the package when the op is declared (~20 s).
"""

from __future__ import annotations

import contextlib
from functools import cache
from pathlib import Path

# MAX is imported inside the functions that use it: importing it takes seconds.

PACKAGE = Path(__file__).resolve().parent / "kernels" / "matvec"


@cache
def _declare(bias: bool):
    from max.dtype import DType
    from max.experimental import custom

    n, k, m = custom.Symbols("n", "k", "m")
    inputs = {"x": custom.TemplateType(DType.float32, [n, k]), "w": custom.TemplateType(DType.float32, [m, k])}
    if bias:
        inputs["b"] = custom.TemplateType(DType.float32, [m])
    return custom.declare("matvec_bias_t" if bias else "matvec_t", inputs=inputs,
                          outputs=[custom.TemplateType(DType.float32, [n, m])], custom_extensions=[PACKAGE])


def matvec():
    """The custom op: matvec()(x, w) -> x @ w.T, in a graph or eagerly."""
    return _declare(False)


def matvec_bias():
    """The custom op: matvec_bias()(x, w, b) -> x @ w.T + b."""
    return _declare(True)


def kernel_linear():
    """A Linear whose product is the kernel: x [..., in] -> [..., out]."""
    from max.experimental.nn import Linear
    from max.experimental.tensor import Tensor

    class KernelLinear(Linear):
        def forward(self, x):
            rows = x.reshape([-1, x.shape[-1]])  # [N, in]
            out = matvec_bias()(rows, self.weight, self.bias) if isinstance(self.bias, Tensor) else \
                matvec()(rows, self.weight) + self.bias
            return out.reshape([*x.shape[:-1], self.weight.shape[0]])

    return KernelLinear


@contextlib.contextmanager
def linears_on_kernel(model):
    """Inside the block, every Linear of `model` multiplies with the kernel (compile there to keep it)."""
    from max.experimental.nn import Linear

    swapped = [module for _, module in model.descendants if type(module) is Linear]
    cls = kernel_linear()
    for module in swapped:
        module.__class__ = cls
    try:
        yield
    finally:
        for module in swapped:
            module.__class__ = Linear
