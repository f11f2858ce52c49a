"""Step 17's timing part: a report, never a verdict. The learner's attention (their kernel, compiled alone)
against step 13's (the scores materialised, masked, softmaxed; at decode the cache grown by F.concat) and
torch's scaled_dot_product_attention, at a prefill of the whole context (T = n_positions) and at a decode
step after n_positions - 1 cached positions; at decode, the bytes of keys and values each layer reads, and
the share of this machine's read bandwidth the kernel reaches. Each decode call reads another layer's caches
(n_layer of them in turn), so that they come from memory, as in a model, not from the CPU's cache.
"""

from __future__ import annotations

import math
import statistics
import time

import numpy as np

from checker.reporting.report import PASS, Part
from runtime.bandwidth import busy_note, others_busy, read_bandwidth, settled
from runtime.compiling import compile_module

# MAX and torch are imported inside the functions that use them: importing them takes seconds.

PREFILL_RUNS, DECODE_RUNS = 5, 60


def _median(run, n: int) -> float:
    for _ in range(2):
        run()
    times = []
    for _ in range(n):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _graphs(flash_attention, H: int, D: int, N: int):
    """The learner's kernel and step 13's attention, each compiled alone (their inputs' sizes symbolic)."""
    from max.experimental import functional as F
    from max.experimental.nn import Module
    from max.experimental.tensor import Tensor

    from solutions.solution_02 import causal_mask

    class Flash(Module):
        def forward(self, q, k, v, k_cache, v_cache, past):
            return flash_attention(q, k, v, k_cache, v_cache, past)

    class Step13(Module):  # solution 13's attention: the past grown by concat, the scores all stored
        def forward(self, q, k, v, past_k, past_v):
            keys, values = F.concat([past_k, k], axis=-2), F.concat([past_v, v], axis=-2)
            seq_len, past = q.shape[-2], past_k.shape[-2]
            seen = F.broadcast_to(Tensor(0.0, dtype=q.dtype, device=q.device), [seq_len, past])
            mask = F.concat([seen, causal_mask(seq_len, 0, dtype=q.dtype, device=q.device)], axis=-1)
            scores = q @ keys.transpose(-1, -2) / math.sqrt(D) + mask
            return F.softmax(scores, axis=-1) @ values

    new = (np.zeros((1, H, 1, D), np.float32), ("batch", None, "seq", None))
    cache = (np.zeros((1, H, N, D), np.float32), ("batch", None, None, None))
    past = (np.zeros((1, H, 0, D), np.float32), ("batch", None, "past", None))
    flash = compile_module(Flash(), [new, new, new, cache, cache, (np.zeros(1, np.int64), (None,))])
    step13 = compile_module(Step13(), [new, new, new, past, past])
    return flash, step13


def timing_part(step, config) -> Part:
    """The report: prefill of the whole context and one decode step after it, each attention timed alone."""
    import torch
    from max.experimental.tensor import Tensor

    H, D, N, L = config.n_head, config.n_embd // config.n_head, config.n_positions, config.n_layer
    flash, step13 = _graphs(step.flash_attention, H, D, N)
    rng = np.random.default_rng(17)

    def tensor(*shape):
        return Tensor.from_dlpack(rng.standard_normal(shape, dtype=np.float32))

    caches = [(tensor(1, H, N, D), tensor(1, H, N, D)) for _ in range(L)]  # a layer's each: read from memory
    pasts = [(tensor(1, H, N - 1, D), tensor(1, H, N - 1, D)) for _ in range(L)]
    rows = {}
    with others_busy() as busy:
        q, k, v = tensor(1, H, N, D), tensor(1, H, N, D), tensor(1, H, N, D)
        empty = Tensor.from_dlpack(np.zeros((1, H, 0, D), np.float32))
        at = [Tensor.from_dlpack(np.array([p], np.int64)) for p in (0, N - 1)]
        tq, tk, tv = (torch.from_numpy(np.from_dlpack(t).copy()) for t in (q, k, v))
        settled()
        rows["prefill"] = {
            "your kernel": _median(lambda: flash(q, k, v, *caches[0], at[0]), PREFILL_RUNS),
            "step 13's": _median(lambda: step13(q, k, v, empty, empty), PREFILL_RUNS),
            "torch's": _median(lambda: torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True),
                               PREFILL_RUNS)}
        q1, k1, v1 = tensor(1, H, 1, D), tensor(1, H, 1, D), tensor(1, H, 1, D)
        turn = iter(range(10**9))
        t1 = torch.from_numpy(np.from_dlpack(q1).copy())
        tkeys = [torch.from_numpy(np.from_dlpack(c[0]).copy()) for c in caches]
        tvalues = [torch.from_numpy(np.from_dlpack(c[1]).copy()) for c in caches]
        settled()
        # A call's own cost (its Python and the graph's launch), measured on a call with one key: subtracted.
        alone = _median(lambda: flash(q1, k1, v1, *caches[next(turn) % L], at[0]), DECODE_RUNS)
        rows["decode"] = {
            "your kernel": _median(lambda: flash(q1, k1, v1, *caches[next(turn) % L], at[1]), DECODE_RUNS) - alone,
            "step 13's": _median(lambda: step13(q1, k1, v1, *pasts[next(turn) % L]), DECODE_RUNS) - alone,
            "torch's": _median(lambda: torch.nn.functional.scaled_dot_product_attention(
                t1, tkeys[next(turn) % L], tvalues[next(turn) % L]), DECODE_RUNS)}
    limit = read_bandwidth()
    kv = 2 * H * N * D * 4  # one layer's keys and values at N positions, float32
    read, kernel = kv / limit, max(rows["decode"]["your kernel"], 1e-9)
    lines = [f"prefill, T = {N}: " + "; ".join(f"{name} {t * 1e3:.1f} ms" for name, t in rows["prefill"].items()),
             f"decode after {N - 1} positions, one layer: " + "; ".join(
                 f"{name} {t * 1e3:.3f} ms" for name, t in rows["decode"].items())
             + f" (each call's own cost, {alone * 1e3:.2f} ms, subtracted from the graphs')",
             f"a layer's keys and values at decode: {kv / 1e6:.1f} MB, {read * 1e3:.3f} ms at the {limit / 1e9:.1f} "
             f"GB/s this machine reads now: your kernel reads them at {kv / kernel / 1e9:.1f} GB/s, "
             f"{read / kernel:.0%} of it", *busy_note(busy)]
    prefill = rows["prefill"]["step 13's"] / rows["prefill"]["your kernel"]
    decode = rows["decode"]["step 13's"] / kernel
    return Part("timing", PASS, f"a report, not a verdict: your attention {prefill:.2f}x as fast as step 13's at a "
                f"prefill of {N} positions, {decode:.2f}x at a decode step after {N - 1}", lines)
