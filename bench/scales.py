"""`python -m bench.scales`: a decode step's 49 products with solution 18's kernel as it is (a float32 scale a
block of 32 int8 weights) against the same kernel reading float16 scales, as llama.cpp's Q8_0 keeps them (132 MB a
token instead of 139).

The float16 kernel is solution 18's products made from its source by EDITS into a package of its own (its op
`gpt2_matmul_q8h`); its products equal the float32 kernel's on the same scales bit for bit (checked first, on
SHAPES). Then both chains of GPT-2's 49 products at one row of x (random weights; each output's first n_embd
columns the next one's x where widths differ) are compiled in one process and timed in alternating rounds.
`--order hf` compiles the float16 chain first (the order of compiling moves a graph's time a little).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

import runtime
from bench.machine import cpu
from runtime.bandwidth import alternating_seconds
from runtime.paths import REPO
from runtime.quantize import BLOCK, quantize

# MAX and solution 18 are imported inside the functions that use them: importing them takes seconds.

SOLUTION = REPO / "solutions" / "solution_18_kernel"
C, LAYERS, VOCAB = 768, 12, 50257
PRODUCTS = [(3 * C, C), (C, C), (4 * C, C), (C, 4 * C)] * LAYERS + [(VOCAB, C)]  # (N, K): a decode step's, in turn
SHAPES = [(1, 768, 2304), (3, 100, 13), (16, 768, 50)]  # (M, K, N) the two kernels are compared on
ROUNDS = 40
HALF = "sp: UnsafePointer[Float16, ImmutAnyOrigin]"
WIDENED = ".cast[DType.float32]()"
EDITS = {  # file -> (old, new, count): solution 18's products with float16 scales
    "int8_products.mojo": [
        ("sp: UnsafePointer[Float32, ImmutAnyOrigin]", HALF, 4),
        ("* sp[unsafe_offset=n * KB + b] *", f"* sp[unsafe_offset=n * KB + b]{WIDENED} *", 1),
        ("var sw = block_scales(sp, n * KB + PER * p)", "var sw = half_scales(sp, n * KB + PER * p)", 1),
        ("sp.gather(rows * Int32(KB) + Int32(b)))", f"sp.gather(rows * Int32(KB) + Int32(b)){WIDENED})", 1),
        ("@always_inline\ndef rint[", '''@always_inline
def half_scales(p: UnsafePointer[Float16, _], at: Int) -> SIMD[DType.float32, L]:
    comptime if PER == 1:
        return SIMD[DType.float32, L](p[at].cast[DType.float32]())
    else:
        var two = p.load[width=2](at).cast[DType.float32]()
        var both = SIMD[DType.float32, L // 2](two[0]).join(SIMD[DType.float32, L // 2](two[1]))
        return rebind[SIMD[DType.float32, L]](both)


@always_inline
def rint[''', 1)],
    "matmul_q8.mojo": [
        ('"gpt2_matmul_q8"', '"gpt2_matmul_q8h"', 1),
        ("scales: InputTensor[dtype=DType.float32", "scales: InputTensor[dtype=DType.float16", 1),
        ("sp: UnsafePointer[Float32, ImmutAnyOrigin]", HALF, 6),
        ("* sp[unsafe_offset=n * KB + k // BLOCK]", f"* sp[unsafe_offset=n * KB + k // BLOCK]{WIDENED}", 3)],
}


def half_package(folder: Path) -> Path:
    """Solution 18's products with float16 scales, as a Mojo package in `folder` (its attention left out)."""
    package = folder / "scales_f16"
    package.mkdir()
    (package / "__init__.mojo").write_text("")
    for name, edits in EDITS.items():
        source = (SOLUTION / name).read_text()
        for old, new, count in edits:
            assert source.count(old) == count, (name, old, source.count(old))
            source = source.replace(old, new)
        (package / name).write_text(source)
    return package


def half_op(package: Path):
    from max.dtype import DType
    from max.experimental import custom

    m, k, n, kb = custom.Symbols("m", "k", "n", "kb")
    return custom.declare("gpt2_matmul_q8h", inputs={"x": custom.TemplateType(DType.float32, [m, k]),
                                                     "q": custom.TemplateType(DType.int8, [n, k]),
                                                     "scales": custom.TemplateType(DType.float16, [n, kb]),
                                                     "b": custom.TemplateType(DType.float32, [n])},
                          outputs=[custom.TemplateType(DType.float32, [m, n])], custom_extensions=[package])


def same_products(product) -> float:
    """The largest difference between the float16 kernel and solution 18's on SHAPES, both on float16 scales."""
    from max.experimental.tensor import Tensor

    from solutions.solution_18 import matmul_q8

    rng, worst = np.random.default_rng(1), 0.0
    for m, k, n in SHAPES:
        x, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        q, scales = quantize(rng.standard_normal((n, k)).astype(np.float32))
        half = scales.astype(np.float16)
        args = [Tensor.from_dlpack(a) for a in (x, q)]
        got = np.from_dlpack(product(*args, Tensor.from_dlpack(half), Tensor.from_dlpack(b)))
        want = np.from_dlpack(matmul_q8(*args, Tensor.from_dlpack(half.astype(np.float32)), Tensor.from_dlpack(b)))
        worst = max(worst, float(np.abs(got - want).max()))
    return worst


def chain(product, scale_dtype, rng):
    """PRODUCTS chained at one row of x, compiled: `product(x, q, scales, b)` on scales of `scale_dtype`."""
    from max.driver import CPU
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.nn import Module
    from max.experimental.tensor import Tensor
    from max.graph import TensorType

    class Product(Module):
        def __init__(self, n, k):
            self.q = Tensor.zeros([n, k], dtype=DType.int8)
            self.scales = Tensor.zeros([n, -(-k // BLOCK)], dtype=DType.from_numpy(scale_dtype))
            self.bias = Tensor.zeros([n])

    class Chain(Module):
        def __init__(self):
            self.products = [Product(n, k) for n, k in PRODUCTS]

        def forward(self, x):
            for p, (n, _) in zip(self.products, PRODUCTS):
                y = product(x, p.q, p.scales, p.bias)
                x = y if n in (4 * C, VOCAB) else y[:, :C]  # the next product's K
            return x

    weights = {}
    for i, (n, k) in enumerate(PRODUCTS):
        q, scales = quantize(rng.standard_normal((n, k)).astype(np.float32))
        weights |= {f"products.{i}.q": q, f"products.{i}.scales": scales.astype(scale_dtype),
                    f"products.{i}.bias": np.zeros(n, np.float32)}
    with F.lazy():
        model = Chain()
    return model.compile(TensorType(DType.float32, [1, C], device=CPU()), weights=weights)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scales", description=__doc__.split("\n\n")[0])
    parser.add_argument("--order", choices=["fh", "hf"], default="fh", help="which chain compiles first (f: float32)")
    order = parser.parse_args(argv).order
    runtime.setup()
    from max.driver import Buffer

    from solutions.solution_18 import matmul_q8

    name, vectors = cpu()
    with tempfile.TemporaryDirectory() as tmp:
        half = half_op(half_package(Path(tmp)))
        print(f"{name} ({', '.join(vectors)}): float16 scales against solution 18's on the same scales, "
              f"largest difference {same_products(half):.1e} on {len(SHAPES)} shapes")
        rng = np.random.default_rng(0)
        versions = {"f": (matmul_q8, np.float32), "h": (half, np.float16)}
        chains = {v: chain(*versions[v], rng) for v in order}
        x = Buffer.from_numpy(rng.standard_normal((1, C)).astype(np.float32))
        took = alternating_seconds({v: lambda v=v: chains[v].execute_raw(x) for v in order}, ROUNDS)
    f, h = (1e3 * statistics.median(took[v]) for v in "fh")
    print(f"{len(PRODUCTS)} products at one row of x, median of {ROUNDS} alternating rounds: float32 scales "
          f"{f:.2f} ms, float16 {h:.2f} ms: float16 / float32 {h / f:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
