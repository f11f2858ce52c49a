"""`python -m bench.tried`: what was tried to bring decode closer to the memory limit, measured again.

    python -m bench.tried           the four experiments below (~1.5 min on 2 CPUs; ~5 min the first time: new graphs)

1. LayerNorm as MAX's single `F.layer_norm` op against step 03's five ops, in solution 13's decode.
2. Each weight product at batch 1 with the weight stored [out, in] (`x @ W.T`, as Linear stores it)
   against [in, out] (`x @ W`).
3. The tied head as a broadcast multiply and a sum (`F.sum(wte * x, axis=-1)`) against the matmul,
   in solution 13's decode.
4. A matrix-vector kernel written in Mojo (bench/kernel.py) for every product, alone at batch 1 and in
   solution 13's decode (its Linears and its tied head).

Each decode figure is the median tokens/s of 3 greedy runs (128-token prompt, 64 new tokens) after a
warm-up, the variants interleaved; the greedy tokens of each variant are compared with solution 13's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import runtime
from bench.kernel import linears_on_kernel, matvec
from bench.kv_cache import greedy
from bench.machine import cpu
from bench.matvec import matvec_shapes
from runtime.bandwidth import median_seconds
from runtime.checkpoints import checkpoint_for_command
from runtime.compiling import compile_with_cache
from runtime.loading import stored_tensors

# MAX and the solutions (which import MAX) are imported inside the functions that use them: importing them
# takes seconds.

SOLUTION = Path(__file__).resolve().parent.parent / "solutions" / "solution_13.py"
VARIANTS = {
    "F.layer_norm": [(f"block.{ln}(x)", f"F.layer_norm(x, gamma=block.{ln}.weight, beta=block.{ln}.bias, "
                      f"epsilon=block.{ln}.eps)") for ln in ("ln_1", "ln_2")]
    + [("t.ln_f(x[:, -1, :])", "F.layer_norm(x[:, -1, :], gamma=t.ln_f.weight, beta=t.ln_f.bias, epsilon=t.ln_f.eps)")],
    "multiply-and-sum head": [("return (last @ t.wte.weight.T, *new_cache)",
                               "return (F.squeeze(F.sum(t.wte.weight * F.unsqueeze(last, 1), axis=-1), -1), "
                               "*new_cache)")],
}
KERNEL = "Mojo matvec kernel"  # its Linears swapped too (bench.kernel.linears_on_kernel)
KERNEL_HEAD = [("return (last @ t.wte.weight.T, *new_cache)", "return (matvec()(last, t.wte.weight), *new_cache)")]


def variant_class(edits: list[tuple[str, str]], **names):
    """Solution 13's GPT2WithCache with `edits` made to its source (`names` added to its globals)."""
    source = SOLUTION.read_text()
    for old, new in edits:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    namespace: dict = dict(names)
    exec(compile(source, "<solution 13, edited>", "exec"), namespace)
    return namespace["GPT2WithCache"]


def decode_variants(checkpoint) -> None:
    from max.experimental import functional as F

    from solutions.solution_11 import GPT2LMHeadModel, load_hf_weights
    from solutions.solution_13 import GPT2WithCache

    config = checkpoint.learner_config()
    with F.lazy():
        model = GPT2LMHeadModel(config)
    load_hf_weights(model, stored_tensors(checkpoint))
    classes = {"solution 13": GPT2WithCache, **{name: variant_class(e) for name, e in VARIANTS.items()}}
    runs = {}
    for name, cls in classes.items():
        started = time.perf_counter()
        runs[name] = compile_with_cache(cls(model), config)
        print(f"{name}: compiled in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    with linears_on_kernel(model):
        runs[KERNEL] = compile_with_cache(variant_class(KERNEL_HEAD, matvec=matvec)(model), config)
    prompt = np.random.default_rng(0).integers(0, config.vocab_size, (1, 128))
    rates: dict[str, list[float]] = {name: [] for name in runs}
    tokens = {}
    for _ in range(4):
        for name, run in runs.items():
            ids, seconds = greedy(run, config, prompt, 64)
            rates[name].append(64 / seconds)
            tokens[name] = ids
    for name in runs:
        same = "same tokens" if np.array_equal(tokens[name], tokens["solution 13"]) else "OTHER TOKENS"
        print(f"| decode, {name} | {statistics.median(rates[name][1:]):.1f} tokens/s | {same} |")


def layouts(config, repeats: int = 30) -> None:
    from max.driver import CPU
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.nn import Module
    from max.experimental.tensor import Tensor
    from max.graph import TensorType

    class OutIn(Module):
        def __init__(self, n_in, n_out):
            self.weight = Tensor.zeros([n_out, n_in])

        def forward(self, x):
            return x @ self.weight.T

    class InOut(Module):
        def __init__(self, n_in, n_out):
            self.weight = Tensor.zeros([n_in, n_out])

        def forward(self, x):
            return x @ self.weight

    class Kernel(OutIn):
        def forward(self, x):
            return matvec()(x, self.weight)

    rng = np.random.default_rng(0)
    for name, n_in, n_out, _, _ in matvec_shapes(config):
        runs = []
        x = rng.standard_normal((1, n_in)).astype(np.float32)
        w = rng.standard_normal((n_out, n_in)).astype(np.float32)
        for cls, weight in ((OutIn, w), (InOut, np.ascontiguousarray(w.T)), (Kernel, w)):
            with F.lazy():
                module = cls(n_in, n_out)
            runs.append(module.compile(TensorType(DType.float32, [1, n_in], device=CPU()), weights={"weight": weight}))
        xt = Tensor.from_dlpack(x)
        outs = [np.from_dlpack(run(xt)) for run in runs]
        worst = max(float(np.abs(out - outs[0]).max()) for out in outs)
        for _ in range(2):  # interleaved, the median of the second round kept
            ms = [1e3 * median_seconds(lambda: np.from_dlpack(run(xt)), repeats) for run in runs]
        print(f"| {name} [{n_in}, {n_out}]: x @ W.T [out, in] / x @ W [in, out] / Mojo kernel | {ms[0]:.2f} ms | "
              f"{ms[1]:.2f} ms | {ms[2]:.2f} ms | outputs within {worst:.1e} |")


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m bench.tried", description=__doc__.split("\n\n")[0]).parse_args(argv)

    runtime.setup()

    if (checkpoint := checkpoint_for_command()) is None:
        return 2
    name, vectors = cpu()
    print(f"{name} ({', '.join(vectors)}), {checkpoint.describe()}")
    layouts(checkpoint.learner_config())
    decode_variants(checkpoint)
    return 0


if __name__ == "__main__":
    sys.exit(main())
