"""`python -m bench.tried`: what was tried to bring decode closer to the memory limit, measured again.

    python -m bench.tried           the three experiments below (~1 min on 2 CPUs; ~4 min the first time: two new graphs)

1. LayerNorm as MAX's single `F.layer_norm` op against step 03's five ops, in solution 13's decode.
2. Each weight product at batch 1 with the weight stored [out, in] (`x @ W.T`, as Linear stores it)
   against [in, out] (`x @ W`).
3. The tied head as a broadcast multiply and a sum (`F.sum(wte * x, axis=-1)`) against the matmul,
   in solution 13's decode.

Each decode figure is the median tokens/s of 3 greedy runs (128-token prompt, 64 new tokens) after a
warm-up, the variants interleaved; the greedy tokens of each variant are compared with solution 13's.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

SOLUTION = Path(__file__).resolve().parent.parent / "solutions" / "solution_13.py"
VARIANTS = {
    "F.layer_norm": [(f"block.{ln}(x)", f"F.layer_norm(x, gamma=block.{ln}.weight, beta=block.{ln}.bias, "
                      f"epsilon=block.{ln}.eps)") for ln in ("ln_1", "ln_2")]
    + [("t.ln_f(x[:, -1, :])", "F.layer_norm(x[:, -1, :], gamma=t.ln_f.weight, beta=t.ln_f.bias, epsilon=t.ln_f.eps)")],
    "multiply-and-sum head": [("return (last @ t.wte.weight.T, *new_cache)",
                               "return (F.squeeze(F.sum(t.wte.weight * F.unsqueeze(last, 1), axis=-1), -1), *new_cache)")],
}


def variant_class(edits: list[tuple[str, str]]):
    """Solution 13's GPT2WithCache with `edits` made to its source."""
    source = SOLUTION.read_text()
    for old, new in edits:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    namespace: dict = {}
    exec(compile(source, "<solution 13, edited>", "exec"), namespace)
    return namespace["GPT2WithCache"]


def decode_variants(checkpoint) -> None:
    from max.experimental import functional as F

    from bench.kv_cache import greedy
    from checker.step11 import stored_tensors
    from checker.step13 import compile_with_cache
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

    from bench.__main__ import median_seconds
    from bench.matvec import matvec_shapes

    rng = np.random.default_rng(0)
    for name, n_in, n_out, _, _ in matvec_shapes(config):
        ms = []
        for cls in (OutIn, InOut):
            with F.lazy():
                module = cls(n_in, n_out)
            weights = {k: rng.standard_normal(tuple(int(d) for d in v.shape)).astype(np.float32)
                       for k, v in module.parameters}
            run = module.compile(TensorType(DType.float32, [1, n_in], device=CPU()), weights=weights)
            x = Tensor.from_dlpack(rng.standard_normal((1, n_in)).astype(np.float32))
            ms.append(1e3 * median_seconds(lambda: np.from_dlpack(run(x)), repeats))
        print(f"| {name} [{n_in}, {n_out}]: [out, in] x @ W.T / [in, out] x @ W | {ms[0]:.2f} ms | {ms[1]:.2f} ms |")


def main() -> int:
    import checker  # noqa: F401  (MAX's executor setting)
    from bench.__main__ import cpu
    from checker.weights import checkpoint_for_command

    if (checkpoint := checkpoint_for_command()) is None:
        return 2
    name, vectors = cpu()
    print(f"{name} ({', '.join(vectors)}), {checkpoint.describe()}")
    layouts(checkpoint.learner_config())
    decode_variants(checkpoint)
    return 0


if __name__ == "__main__":
    sys.exit(main())
