"""`pixi run bench --profile`: where a decode step's time goes.

At batch 1 a decode step is a chain of matrix-vector products, one per weight
matrix, plus small ops (layer norms, the attention over the cache, GELU). Each
distinct product of GPT-2 is compiled here alone, twice: as the step classes
compute it with MAX's product (`Linear`: x @ W.T + b, W stored [out, in]; the
tied head: x @ wte.T), and through step 15's Mojo kernel (solution 15's
`matvec`). Both are timed at batch 1, in alternating rounds so that the
machine's drift falls on both alike. Their sums per token, against the whole
decode steps, say how much of a step is reading weights and how fast each
product reads them.

For step 16's int8 decode (int8_split), one step at 160 cached positions three
ways: as solution 16 compiles it, with step 13's attention in its place (the
cache grown by F.concat, the mask), and its 49 int8 products alone, chained in
one graph: what the products take, and what the rest takes before and after.
"""

from __future__ import annotations

import statistics
import time
from unittest import mock

import numpy as np

from runtime.bandwidth import settled
from runtime.compiling import Compiled, compile_decode

# MAX and the solutions (which import MAX) are imported inside the functions that use them: importing them
# takes seconds.


def matvec_shapes(config) -> list[tuple[str, int, int, int, bool]]:
    """(name, in, out, times per token, has bias) of every weight matrix a decode step multiplies by."""
    c, inner, n = config.n_embd, config.n_inner, config.n_layer
    return [("attn.c_attn", c, 3 * c, n, True), ("attn.c_proj", c, c, n, True), ("mlp.c_fc", c, inner, n, True),
            ("mlp.c_proj", inner, c, n, True), ("tied head (wte.T)", c, config.vocab_size, 1, False)]


def _products(n_in: int, n_out: int, bias: bool, rng) -> dict:
    """The product x [1, in] -> [1, out] compiled twice, MAX's and the kernel's, on the same weights."""
    from max.driver import CPU
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.nn import Linear, Module
    from max.experimental.tensor import Tensor
    from max.graph import TensorType

    from solutions.solution_15 import matvec

    class Head(Module):
        def __init__(self, vocab, width):
            self.weight = Tensor.zeros([vocab, width])

        def forward(self, x):
            return x @ self.weight.T

    class KernelProduct(Module):
        def __init__(self):
            self.weight = Tensor.zeros([n_out, n_in])
            if bias:
                self.bias = Tensor.zeros([n_out])

        def forward(self, x):
            return matvec(x, self.weight, self.bias if bias else None)

    with F.lazy():  # no random initialisation: the weights come with compile()
        modules = dict(max=Linear(n_in, n_out, bias=True) if bias else Head(n_out, n_in), kernel=KernelProduct())
    weights = {k: rng.standard_normal(tuple(int(d) for d in v.shape)).astype(np.float32)
               for k, v in modules["max"].parameters}
    in_type = TensorType(DType.float32, [1, n_in], device=CPU())
    return {name: module.compile(in_type, weights=weights) for name, module in modules.items()}


def _alternating(runs: dict, repeats: int, rounds: int) -> dict[str, float]:
    """The median seconds of each call in `runs` (name -> a callable giving a Tensor), timed in `rounds`
    alternating blocks of repeats // rounds calls after 3 untimed ones, each block after the threads of
    the one before are quiet (runtime.bandwidth.settled)."""
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            settled()
            for _ in range(3):
                np.from_dlpack(run())
            for _ in range(repeats // rounds):
                started = time.perf_counter()
                np.from_dlpack(run())
                samples[name].append(time.perf_counter() - started)
    return {name: statistics.median(s) for name, s in samples.items()}


def time_matvecs(config, repeats: int = 30, rounds: int = 5) -> list[dict]:
    """Each product alone, MAX's and the kernel's: median ms at batch 1 and the GB/s at which each reads
    its weight (the kernel's result checked against MAX's first)."""
    from max.experimental.tensor import Tensor

    rng = np.random.default_rng(0)
    rows = []
    for name, n_in, n_out, times, bias in matvec_shapes(config):
        runs = _products(n_in, n_out, bias, rng)
        x = Tensor.from_dlpack(rng.standard_normal((1, n_in)).astype(np.float32))
        outputs = {side: np.from_dlpack(run(x)) for side, run in runs.items()}
        np.testing.assert_allclose(outputs["kernel"], outputs["max"], rtol=1e-3, atol=1e-3)
        seconds = _alternating({side: (lambda run=run: run(x)) for side, run in runs.items()}, repeats, rounds)
        nbytes = 4 * n_in * n_out
        rows.append(dict(name=name, shape=f"[1, {n_in}] x [{n_in}, {n_out}]", per_token=times,
                         ms=1e3 * seconds["max"], gb_s=nbytes / seconds["max"] / 1e9,
                         kernel_ms=1e3 * seconds["kernel"], kernel_gb_s=nbytes / seconds["kernel"] / 1e9))
    return rows


def _int8_products(config):
    """The 49 int8 products of a decode step (solution 16's kernel), chained in one graph: x [1, C] through
    each block's four and then the head, each output cut to the next input. Compiled, on random weights."""
    from max.driver import CPU
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.nn import Module
    from max.experimental.tensor import Tensor
    from max.graph import TensorType

    from solutions.solution_16 import matvec_q8, quantize

    per_block = [(k, m) for _, k, m, times, _ in matvec_shapes(config) if times == config.n_layer]
    shapes = per_block * config.n_layer + [(k, m) for _, k, m, times, _ in matvec_shapes(config) if times == 1]

    class Product(Module):
        def __init__(self, k, m):
            self.q, self.scales = Tensor.zeros([m, k], dtype=DType.int8), Tensor.zeros([m, -(-k // 32)])

    class Chain(Module):
        def __init__(self):
            for i, (k, m) in enumerate(shapes):
                setattr(self, f"p{i}", Product(k, m))

        def forward(self, x):
            for i, (k, m) in enumerate(shapes):
                p = getattr(self, f"p{i}")
                x = matvec_q8(x[:, :k], p.q, p.scales) * 0.01  # [1, m]; scaled so the chain stays finite
            return x

    with F.lazy():
        chain = Chain()
    rng, weights = np.random.default_rng(0), {}
    for i, (k, m) in enumerate(shapes):
        weights[f"p{i}.q"], weights[f"p{i}.scales"] = quantize(rng.standard_normal((m, k)).astype(np.float32))
    return Compiled(chain.compile(TensorType(DType.float32, [1, config.n_embd], device=CPU()), weights=weights))


def int8_split(model, config, past: int = 160, repeats: int = 40) -> dict:
    """Where solution 16's int8 decode step goes, at `past` cached positions: the step as the solution
    compiles it (the cache grown by its append kernel, no mask), the step with step 13's attention in its
    place (F.concat, the mask: as it was before), and the 49 products alone; median ms of each, in
    alternating rounds. `model` is a loaded step 11 model (solution 11)."""
    from max.experimental.tensor import Tensor

    import solutions.solution_16 as sixteen
    from solutions.solution_13 import attention_with_cache

    rng = np.random.default_rng(0)
    head_dim = config.n_embd // config.n_head
    cache = [Tensor.from_dlpack(rng.standard_normal((1, config.n_head, past, head_dim)).astype(np.float32))
             for _ in range(2 * config.n_layer)]
    ids = Tensor.from_dlpack(np.array([[1]], dtype=np.int64))
    x = Tensor.from_dlpack(rng.standard_normal((1, config.n_embd)).astype(np.float32))
    step = compile_decode(sixteen.GPT2Quantized(model), config)
    with mock.patch.object(sixteen, "decode_attention", attention_with_cache):
        before = compile_decode(sixteen.GPT2Quantized(model), config)
    products = _int8_products(config)
    runs = dict(step=lambda: step(ids, *cache)[0], before=lambda: before(ids, *cache)[0], products=lambda: products(x))
    return dict(past=past, **{f"{name}_ms": 1e3 * s for name, s in _alternating(runs, repeats, rounds=4).items()})
