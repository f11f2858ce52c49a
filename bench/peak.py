"""`python -m bench.peak`: what one core multiplies at most, beside what step 18's batched products reach.

    python -m bench.peak     (~1 min once compiled, ~2 min the first time)

1. bench/kernels/peak's loops on one core, the operands in its cache: float32 FMA, int8 the AVX2 way
   (vpsignb, vpmaddubsw, vpmaddwd: step 18's gemm on a CPU without VNNI) and, where the CPU has it, int8
   with AVX-512 VNNI (vpdpbusd): products a nanosecond, the best of 9 runs of ~0.3 s (three rounds of the loops
   in turn): the most the core does, which a busy neighbour only lowers.
2. Solution 18's matmul_q8 on a prefill's products (GPT-2's MLP, x of 2048 rows: four prompts of 512),
   every core: products a nanosecond in all and per core (the best of 8 runs), against the loop of the kind it
   runs.

A prefill's int8 products can go no faster than the int8 loop allows, whatever the kernel: where that loop is
little faster than float32's (AVX2: 1.5x at best), a float32 prefill near the FMA's rate keeps up with them.
"""

from __future__ import annotations

import argparse
import os
import sys
from functools import cache
from pathlib import Path

import numpy as np

import runtime
from bench.machine import cpu
from runtime.bandwidth import run_seconds

# MAX and solution 18 are imported inside the functions that use them: importing them takes seconds.

PACKAGE = Path(__file__).resolve().parent / "kernels" / "peak"
LOOPS = {"float32 FMA": (0, 96), "int8, AVX2 (vpsignb, vpmaddubsw, vpmaddwd)": (1, 256),
         "int8, AVX-512 VNNI (vpdpbusd)": (2, 512)}  # name: (kind, products an iteration)
SHAPES = (("mlp.c_fc", 768, 3072), ("mlp.c_proj", 3072, 768))  # (name, K, N)
ROWS = 2048


def best_seconds(fn, repeats: int) -> float:
    """The shortest of `repeats` runs of fn() after a warm-up: what the core can do (a neighbour only slows it)."""
    return min(run_seconds(fn, repeats))


@cache
def _op():
    from max.dtype import DType
    from max.experimental import custom

    return custom.declare("peak_products", inputs={"setup": custom.TemplateType(DType.int64, [2]),
                                                   "data": custom.TemplateType(DType.float32, [1024])},
                          outputs=[custom.TemplateType(DType.float32, [1])], custom_extensions=[PACKAGE])


def loop_op(kind: int, n: int, data: np.ndarray) -> float:
    """Loop `kind` run n iterations over data (1024 float32, or their bytes): the sum of its products."""
    from max.experimental.tensor import Tensor

    setup = Tensor.from_dlpack(np.array([kind, n], dtype=np.int64))
    return float(np.from_dlpack(_op()(setup, Tensor.from_dlpack(data)))[0])


def loop_rates(kinds: list[str]) -> dict[str, float]:
    """Products a nanosecond on one core, for each loop in `kinds`."""
    data = np.random.default_rng(0).uniform(0.5, 1.0, 1024).astype(np.float32)

    def run(kind, n):
        return lambda: loop_op(kind, n, data)

    rates = dict.fromkeys(kinds, 0.0)
    for _ in range(3):  # the loops in turn, three times
        for name in kinds:
            kind, per = LOOPS[name]
            n = 1 << 20
            n = max(n, int(n * 0.3 / best_seconds(run(kind, n), 1)))  # ~0.3 s a run
            rates[name] = max(rates[name], n * per / best_seconds(run(kind, n), 3) / 1e9)
    return rates


def kernel_rates() -> list[tuple[str, int, int, float]]:
    """(name, K, N, products a nanosecond, every core) of solution 18's matmul_q8 on x [ROWS, K]."""
    from max.driver import CPU
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.nn import Module
    from max.experimental.tensor import Tensor
    from max.graph import TensorType

    from solutions.solution_18 import matmul_q8

    class Product(Module):
        def __init__(self, q, scales, b):
            self.q, self.scales, self.b = q, scales, b

        def forward(self, x):
            return matmul_q8(x, self.q, self.scales, self.b)

    rng = np.random.default_rng(0)
    rows = []
    for name, K, N in SHAPES:
        q = rng.integers(-127, 128, (N, K)).astype(np.int8)
        scales = rng.uniform(1e-3, 1e-2, (N, K // 32)).astype(np.float32)
        with F.lazy():
            product = Product(*(Tensor.from_dlpack(a) for a in (q, scales, rng.standard_normal(N).astype(np.float32))))
        run = product.compile(TensorType(DType.float32, [ROWS, K], device=CPU()))
        x = Tensor.from_dlpack(rng.standard_normal((ROWS, K)).astype(np.float32))
        rows.append((name, K, N, ROWS * K * N / best_seconds(lambda: np.from_dlpack(run(x)), 8) / 1e9))
    return rows


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m bench.peak", description=__doc__.split("\n\n")[0]).parse_args(argv)
    runtime.setup()
    name, vectors = cpu()
    cores = os.cpu_count() or 1
    kinds = ["float32 FMA"]
    if "avx2" in vectors:
        kinds.append("int8, AVX2 (vpsignb, vpmaddubsw, vpmaddwd)")
    if "avx512_vnni" in vectors:
        kinds.append("int8, AVX-512 VNNI (vpdpbusd)")
    print(f"{name} ({', '.join(vectors)}), {cores} CPUs")
    rates = loop_rates(kinds)
    print("| loop, one core | products a nanosecond |\n| --- | --- |")
    for kind, rate in rates.items():
        print(f"| {kind} | {rate:.1f} |")
    if len(kinds) == 1:
        print("solution 18 multiplies as float32 here (no AVX2): no int8 loop to set it against")
        return 0
    peak = rates[kinds[-1]]  # the kind solution 18's gemm runs: VNNI where the CPU has it, else AVX2's
    print(f"\nsolution 18's matmul_q8, x of {ROWS} rows, {cores} cores; its loop: {kinds[-1]}\n")
    print("| product | products a nanosecond | per core | of the loop's |\n| --- | --- | --- | --- |")
    for shape, K, N, rate in kernel_rates():
        print(f"| {shape} [{K} -> {N}] | {rate:.1f} | {rate / cores:.1f} | {rate / cores / peak:.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
