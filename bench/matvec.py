"""`pixi run bench --profile`: where a decode step's time goes.

At batch 1 a decode step is a chain of matrix-vector products, one per weight
matrix, plus small ops (layer norms, the attention over the cache, GELU). Each
distinct product of GPT-2 is compiled here alone, as the step classes compute
it (`Linear`: x @ W.T + b, W stored [out, in]; the tied head: x @ wte.T), and
timed at batch 1. Their sum per token, against the whole decode step, says how
much of the step is reading weights and how fast MAX's kernel reads them.
"""

from __future__ import annotations

import time

import numpy as np


def matvec_shapes(config) -> list[tuple[str, int, int, int, bool]]:
    """(name, in, out, times per token, has bias) of every weight matrix a decode step multiplies by."""
    c, inner, n = config.n_embd, config.n_inner, config.n_layer
    return [("attn.c_attn", c, 3 * c, n, True), ("attn.c_proj", c, c, n, True), ("mlp.c_fc", c, inner, n, True),
            ("mlp.c_proj", inner, c, n, True), ("tied head (wte.T)", c, config.vocab_size, 1, False)]


def time_matvecs(config, repeats: int = 30) -> list[dict]:
    """Each product alone, compiled: its median ms at batch 1 and the GB/s at which it reads its weight."""
    from max.driver import CPU
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.nn import Linear, Module
    from max.experimental.tensor import Tensor
    from max.graph import TensorType

    class Head(Module):
        def __init__(self, vocab, width):
            self.weight = Tensor.zeros([vocab, width])

        def forward(self, x):
            return x @ self.weight.T

    rng = np.random.default_rng(0)
    rows = []
    for name, n_in, n_out, times, bias in matvec_shapes(config):
        with F.lazy():  # no random initialisation: the weights come with compile()
            module = Linear(n_in, n_out, bias=True) if bias else Head(n_out, n_in)
        weights = {k: rng.standard_normal(tuple(int(d) for d in v.shape)).astype(np.float32)
                   for k, v in module.parameters}
        run = module.compile(TensorType(DType.float32, [1, n_in], device=CPU()), weights=weights)
        x = Tensor.from_dlpack(rng.standard_normal((1, n_in)).astype(np.float32))
        for _ in range(3):
            np.from_dlpack(run(x))
        samples = []
        for _ in range(repeats):
            started = time.perf_counter()
            np.from_dlpack(run(x))
            samples.append(time.perf_counter() - started)
        seconds = float(np.median(samples))
        nbytes = 4 * n_in * n_out
        rows.append(dict(name=name, shape=f"[1, {n_in}] x [{n_in}, {n_out}]", per_token=times, ms=1e3 * seconds,
                         gb_s=nbytes / seconds / 1e9))
    return rows
