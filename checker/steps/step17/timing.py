"""Step 17's timing part: a report, never a verdict. The learner's attention (their kernel) against step 13's
(the scores materialised, masked, softmaxed; at decode the cache grown by F.concat), MAX's own
flash_attention_ragged on its paged cache (runtime.max_attention) and torch's scaled_dot_product_attention,
at a prefill of the whole context (T = n_positions) and at a decode step after n_positions - 1 cached
positions; at decode, the bytes of keys and values a layer reads, and the share of this machine's read
bandwidth the kernel reaches.

Each graph runs the attention of all n_layer layers in one call, each layer on its own cache (read from
memory, as in a model, not from the CPU's cache). A decode layer's time is (a call after n_positions - 1
positions - a call after none) / n_layer: the graph's own cost of a call, about a millisecond, cancels.
"""

from __future__ import annotations

import math

import numpy as np

from checker.reporting.report import PASS, Part
from runtime.bandwidth import busy_note, median_seconds, others_busy, read_bandwidth, settled
from runtime.compiling import compile_module
from runtime.max_attention import MaxAttention

# MAX and torch are imported inside the functions that use them: importing them takes seconds.

PREFILL_RUNS, DECODE_RUNS = 3, 30
NAMES = {"yours": "your kernel", "step13": "step 13's", "max": "MAX's flash_attention_ragged", "torch": "torch's"}
# A layer's decode read faster than this many times the measured bandwidth is the noise of two calls'
# difference, not a read (the core's caches hold at most a share of twelve layers' keys and values).
CREDIBLE = 4


def _graphs(flash_attention, H: int, D: int, N: int, L: int, dtype: np.dtype):
    """The learner's kernel (on caches of `dtype`, as their empty_flash_cache makes them) and step 13's
    attention through L layers in one graph, each layer its own cache (the inputs' sizes symbolic)."""
    from max.experimental import functional as F
    from max.experimental.nn import Module
    from max.experimental.tensor import Tensor

    from solutions.solution_02 import causal_mask

    class Flash(Module):
        def forward(self, q, k, v, past, *caches):
            return tuple(flash_attention(q, k, v, caches[2 * i], caches[2 * i + 1], past) for i in range(L))

    class Step13(Module):  # solution 13's attention: the past grown by concat, the scores all stored
        def forward(self, q, k, v, *pasts):
            return tuple(self.attend(q, k, v, pasts[2 * i], pasts[2 * i + 1]) for i in range(L))

        def attend(self, q, k, v, past_k, past_v):
            keys, values = F.concat([past_k, k], axis=-2), F.concat([past_v, v], axis=-2)
            seq_len, past = q.shape[-2], past_k.shape[-2]
            seen = F.broadcast_to(Tensor(0.0, dtype=q.dtype, device=q.device), [seq_len, past])
            mask = F.concat([seen, causal_mask(seq_len, 0, dtype=q.dtype, device=q.device)], axis=-1)
            scores = q @ keys.transpose(-1, -2) / math.sqrt(D) + mask
            return F.softmax(scores, axis=-1) @ values

    new = (np.zeros((1, H, 1, D), np.float32), ("batch", None, "seq", None))
    cache = (np.zeros((1, H, N, D), dtype), ("batch", None, None, None))
    past = (np.zeros((1, H, 0, D), np.float32), ("batch", None, "past", None))
    flash = compile_module(Flash(), [new, new, new, (np.zeros(1, np.int64), (None,)), *[cache] * (2 * L)])
    step13 = compile_module(Step13(), [new, new, new, *[past] * (2 * L)])
    return flash, step13


def _layer(total: float, alone: float, L: int) -> float | None:
    """A layer's share of a call, its own cost taken away; None when the noise hides it."""
    layer = (total - alone) / L
    return layer if layer > 0 else None


def credible(times: dict[str, float | None], nbytes: dict[str, int], bandwidth: float) -> dict[str, float | None]:
    """Each decode layer's seconds, None where reading its nbytes (a layer's keys and values) that fast would
    take more than CREDIBLE times the measured bandwidth."""
    return {name: None if t is None or nbytes[name] / t > CREDIBLE * bandwidth else t for name, t in times.items()}


def _ms(t: float | None) -> str:
    return f"{t * 1e3:.3f} ms" if t is not None else "too fast to tell from a call's own cost here"


def timing_part(step, config, dtype: np.dtype = np.dtype(np.float32)) -> Part:
    """The report: prefill of the whole context and one decode step after it, through every layer."""
    import torch
    from max.experimental.tensor import Tensor

    H, D, N, L = config.n_head, config.n_embd // config.n_head, config.n_positions, config.n_layer
    flash, step13 = _graphs(step.flash_attention, H, D, N, L, dtype)
    maxs = MaxAttention(H, D, N, layers=L, requests=3)
    rng = np.random.default_rng(17)

    def tensor(*shape):
        return Tensor.from_dlpack(rng.standard_normal(shape, dtype=np.float32))

    def torch_of(t):
        return torch.from_numpy(np.from_dlpack(t).copy())

    caches = [Tensor.from_dlpack(rng.standard_normal((1, H, N, D), dtype=np.float32).astype(dtype))
              for _ in range(2 * L)]
    pasts = [tensor(1, H, N - 1, D) for _ in range(2 * L)]
    empty = [Tensor.from_dlpack(np.zeros((1, H, 0, D), np.float32))] * (2 * L)
    at = [Tensor.from_dlpack(np.array([p], np.int64)) for p in (0, N - 1)]
    q, k, v = tensor(1, H, N, D), tensor(1, H, N, D), tensor(1, H, N, D)
    q1, k1, v1 = tensor(1, H, 1, D), tensor(1, H, 1, D), tensor(1, H, 1, D)
    tq, tk, tv, tq1 = (torch_of(t) for t in (q, k, v, q1))
    tcaches = [torch_of(c).float() for c in caches]
    max_prefill, max_alone, max_decode = maxs.call(0, N), maxs.call(0, 1), maxs.call(N - 1, 1)

    def torch_prefill():
        for _ in range(L):
            torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)

    def torch_decode(keys: int):
        for i in range(L):
            torch.nn.functional.scaled_dot_product_attention(tq1, tcaches[2 * i][:, :, :keys],
                                                             tcaches[2 * i + 1][:, :, :keys])

    prefill, decode = {}, {}
    before = read_bandwidth()
    with others_busy() as busy:
        settled()
        prefill["yours"] = median_seconds(lambda: flash(q, k, v, at[0], *caches), PREFILL_RUNS) / L
        prefill["step13"] = median_seconds(lambda: step13(q, k, v, *empty), PREFILL_RUNS) / L
        prefill["max"] = median_seconds(max_prefill, PREFILL_RUNS) / L
        prefill["torch"] = median_seconds(torch_prefill, PREFILL_RUNS) / L
        settled()
        decode["yours"] = _layer(median_seconds(lambda: flash(q1, k1, v1, at[1], *caches), DECODE_RUNS),
                                 median_seconds(lambda: flash(q1, k1, v1, at[0], *caches), DECODE_RUNS), L)
        decode["step13"] = _layer(median_seconds(lambda: step13(q1, k1, v1, *pasts), DECODE_RUNS),
                                  median_seconds(lambda: step13(q1, k1, v1, *empty), DECODE_RUNS), L)
        decode["max"] = _layer(median_seconds(max_decode, DECODE_RUNS), median_seconds(max_alone, DECODE_RUNS), L)
        decode["torch"] = _layer(median_seconds(lambda: torch_decode(N), DECODE_RUNS),
                                 median_seconds(lambda: torch_decode(1), DECODE_RUNS), L)
    limit = max(before, read_bandwidth())  # another program's load lowers a reading: the higher of two
    # one layer's keys and values at N positions, as each side caches them: the learner's dtype, the others' float32
    nbytes = {name: 2 * H * N * D * (np.dtype(dtype).itemsize if name == "yours" else 4) for name in decode}
    kv, decode = nbytes["yours"], credible(decode, nbytes, limit)
    lines = [f"prefill, T = {N}, a layer: " + "; ".join(f"{NAMES[n]} {t * 1e3:.1f} ms" for n, t in prefill.items()),
             f"decode after {N - 1} positions, a layer: " + "; ".join(f"{NAMES[n]} {_ms(t)}" for n, t in
                                                                      decode.items())]
    yours = decode["yours"]
    if yours is not None:
        lines.append(f"a layer's keys and values at decode: {kv / 1e6:.1f} MB ({np.dtype(dtype)}), "
                     f"{kv / limit * 1e3:.3f} ms at the "
                     f"{limit / 1e9:.1f} GB/s this machine reads now: your kernel reads them at "
                     f"{kv / yours / 1e9:.1f} GB/s, {kv / yours / limit:.0%} of it")
    lines += busy_note(busy)

    def ratios(times: dict) -> str:
        if times["yours"] is None:
            return "too fast to tell"
        return " and ".join(f"{times[other] / times['yours']:.2f}x {NAMES[other]}" for other in ("step13", "max")
                            if times[other] is not None)

    return Part("timing", PASS, f"a report, not a verdict: your attention as fast as {ratios(prefill)} at a "
                f"prefill of {N} positions, {ratios(decode)} at a decode step after {N - 1}", lines)
