"""Step 17's references in numpy: the cases the learner's kernel runs on, what it must compute (in float64),
and attention computed as its known mistakes compute it (the online softmax done wrongly, over tiles of
the sizes a learner may choose).

    kernel_cases()                   (name, B, H, T, P, D, N, magnitude) for each case
    case_arrays(case, seed, dtype)   q, k, v [B, H, T, D], k_cache, v_cache [B, H, N, D] of dtype (P positions
                                     filled)
    expected(q, k, v, kc, vc, P)     the output [B, H, T, D] and the caches after the call
    attend(q, kc, vc, P, lo, hi)     attention where query t sees keys lo(P, t) .. hi(P, t): the right one's
                                     bounds (attention) and a mistake's
"""

from __future__ import annotations

import numpy as np

from checker.reporting.compare import Tolerance

# float32 dot products of D = 64 and sums of up to 1024 weights against float64, where peaked scores (GPT-2's
# magnitudes) amplify float32's rounding, and more so in 8-float vectors (AVX2) than in 16: the solution stays
# under a tenth of this on every case at either width (tests/test_step17.py holds it); a mistake is off by a
# hundredth of the output or more.
KERNEL = Tolerance(2e-4, 2e-4)
D = 64  # GPT-2 small's head_dim
CACHE = 1024  # GPT-2 small's n_positions
# Mojo's exp on 16 float32 lanes (AVX-512) clamps its input at about -88.38 and returns this, a denormal, for
# every x below, where numpy's exp and Mojo's on fewer lanes give 0. A kernel whose threads flush denormals
# (sync_parallelize runs its tasks so) sees 0 all the same; one dispatched without (ctx.enqueue_cpu_range)
# weights a key whose score underflows by it. That decides an output only where every weight underflows.
EXP_FLOOR = 4.156028e-39
LANES = 16


def kernel_cases() -> list[tuple[str, int, int, int, int, int, int, float]]:
    """(name, B, H, T, P, D, N, magnitude): prefill and decode, with and without a cache, key counts no
    multiple of a tile, one key, the whole context, one head alone (its keys split at decode), scores
    of GPT-2's magnitude (the large ones a wrong running maximum cannot hide) and far below 0 (a maximum
    started at 0 loses them all: each tile's, or the combine's of a head's split keys), and 7 heads at decode: a task
    a head, handed out in runs of equal length to the cores, leaves the last ones out when runs are cut short
    (7 is no multiple of 2, 3, 4, 5 or 6, and 12 none of 7 or 8)."""
    return [
        ("prefill T=5, P=0", 1, 2, 5, 0, D, 16, 1.0),
        ("prefill T=7 after P=9, batch 2", 2, 3, 7, 9, D, 40, 1.0),
        ("prefill T=37, P=0 (37 keys: no multiple of a tile)", 1, 2, 37, 0, D, 64, 1.0),
        ("decode P=0 (one key)", 1, 2, 1, 0, D, 8, 1.0),
        ("decode P=100, one head (its keys split)", 1, 1, 1, 100, D, 128, 1.0),
        ("decode P=1023 (the whole context), 12 heads", 1, 12, 1, CACHE - 1, D, CACHE, 1.0),
        ("decode P=300, one head, GPT-2-scale scores", 1, 1, 1, 300, D, 512, 6.0),
        ("prefill T=33 after P=3, GPT-2-scale scores", 1, 2, 33, 3, D, 64, 6.0),
        ("decode P=200, 12 heads, scores far below 0", 1, 12, 1, 200, D, 256, -6.0),
        ("decode P=37, 7 heads (a count of tasks no multiple of the cores)", 1, 7, 1, 37, D, 64, 1.0),
        ("decode P=200, one head (its keys split), scores far below 0", 1, 1, 1, 200, D, 256, -6.0),
    ]


def case_arrays(case: tuple, seed: int, dtype: np.dtype = np.dtype(np.float32)) -> list[np.ndarray]:
    """q, k, v [B, H, T, D], k_cache, v_cache [B, H, N, D] of `dtype` (positions P .. P+T-1, the ones the call
    writes, NaN: a kernel that reads one before it is stored reads NaN; past them zeros), past [1] int64.

    magnitude m scales q and k by |m| (scores ~ m^2 sqrt(D)); m < 0 makes every score of a query negative
    and large (q = -|m| x k's mean direction), where a maximum started at 0 loses them all."""
    _, B, H, T, P, Dh, N, m = case
    rng = np.random.default_rng([seed, B, H, T, P, Dh, N])
    k_cache = np.zeros((B, H, N, Dh), np.float32)
    v_cache = np.zeros((B, H, N, Dh), np.float32)
    k_cache[:, :, :P] = rng.standard_normal((B, H, P, Dh)) * abs(m)
    v_cache[:, :, :P] = rng.standard_normal((B, H, P, Dh))
    k = (rng.standard_normal((B, H, T, Dh)) * abs(m)).astype(np.float32)
    v = rng.standard_normal((B, H, T, Dh)).astype(np.float32)
    q = (rng.standard_normal((B, H, T, Dh)) * abs(m)).astype(np.float32)
    if m < 0:  # every key leans one way, every query the other: all scores far below 0
        k_cache[:, :, :P] += 4 * abs(m)
        k += 4 * abs(m)
        q = -np.abs(q) - 4 * abs(m)
        _lead(q, k, k_cache, P)
    k_cache[:, :, P:P + T] = v_cache[:, :, P:P + T] = np.nan
    return [q, k, v, k_cache.astype(dtype), v_cache.astype(dtype), np.array([P], np.int64)]


LEAD = 8.0  # how far a decode query's best score stands above its next one where scores are far below 0


def _lead(q: np.ndarray, k: np.ndarray, k_cache: np.ndarray, P: int) -> None:
    """Moves each decode query's best key (in place) so that its score leads the next by LEAD: scores of a few
    hundred are exact in float32 to about 1e-4 only, and two near-tied keys would share their weight by how a
    kernel's sums round, not by what it computes."""
    assert q.shape[2] == 1, "a lead is made for decode queries (T = 1), whose keys no other query sees"
    Dh = q.shape[-1]
    for b, h in np.ndindex(q.shape[:2]):
        keys = np.concatenate([k_cache[b, h, :P], k[b, h]]).astype(np.float64)  # [P + 1, D]
        s = keys @ q[b, h, 0].astype(np.float64) / np.sqrt(Dh)
        first, second = np.argsort(s)[-1], np.argsort(s)[-2] if len(s) > 1 else None
        if second is None or s[first] - s[second] >= LEAD:
            continue
        step = (LEAD - (s[first] - s[second])) * np.sqrt(Dh) / float(q[b, h, 0].astype(np.float64) @ q[b, h, 0])
        moved = (keys[first] + step * q[b, h, 0]).astype(np.float32)
        if first < P:
            k_cache[b, h, first] = moved
        else:
            k[b, h, 0] = moved


def written(k, v, k_cache, v_cache, P: int) -> tuple[np.ndarray, np.ndarray]:
    """The caches after the call: the new keys and values at positions P .. P+T-1."""
    T = k.shape[2]
    kc, vc = k_cache.copy(), v_cache.copy()
    kc[:, :, P:P + T], vc[:, :, P:P + T] = k, v
    return kc, vc


def attend(q, kc, vc, P: int, lo, hi, *, scale: float | None = None) -> np.ndarray:
    """Attention in float64 where query t (position P + t) sees keys lo(P, t) .. hi(P, t) of kc and vc
    [B, H, >= P + T, D], scores q . k times `scale` (by default 1 / sqrt(D)); NaN for a query that sees no
    key. `attention` is its causal case; a kernel's mistakes move the bounds or exchange the inputs."""
    T, Dh = q.shape[2], q.shape[3]
    S = P + T
    s = q.astype(np.float64) @ kc[:, :, :S].astype(np.float64).swapaxes(-1, -2)
    s = s * (1 / np.sqrt(Dh) if scale is None else scale)
    j, t = np.arange(S)[None, :], np.arange(T)[:, None]
    s = np.where((j >= lo(P, t)) & (j <= hi(P, t)), s, -np.inf)
    with np.errstate(invalid="ignore"):
        w = np.exp(s - s.max(-1, keepdims=True))
        return (w / w.sum(-1, keepdims=True)) @ vc[:, :, :S].astype(np.float64)


def attention(q, kc, vc, P: int, *, offset: bool = True, scale: float | None = None) -> np.ndarray:
    """Causal attention in float64: query t sees keys 0 .. P + t (`offset`; else 0 .. t), scores q . k times
    `scale` (by default 1 / sqrt(D)). The right output, and mistakes."""
    return attend(q, kc, vc, P, lambda P, t: 0, (lambda P, t: P + t) if offset else (lambda P, t: t), scale=scale)


def expected(q, k, v, k_cache, v_cache, past) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The output [B, H, T, D] in float64, and the caches after the call."""
    P = int(past[0])
    kc, vc = written(k, v, k_cache, v_cache, P)
    return attention(q, kc, vc, P), kc, vc


def online(q, kc, vc, P: int, tile: int, splits: int = 1, *, rescale_l: bool = True, rescale_acc: bool = True,
           start: float = -np.inf, last_tile: bool = True, maxima: bool = True, floor: float = 0.0) -> np.ndarray:
    """The online softmax in float32 as a kernel computes it: each head's S = P + T keys cut into `splits`
    equal parts (the last shorter), each gone over in tiles of `tile` keys from its start, and the parts
    combined. The mistakes: without `rescale_l` the running sum, without `rescale_acc` the accumulator, is
    not multiplied by exp(m_old - m_new); `start` is the running maximum's first value; without `last_tile`
    a part's keys after its last whole tile are left out; without `maxima` the parts are combined as
    sum a_s / sum l_s. `floor` is the least weight exp gives a tile's keys in whole vectors of LANES from
    its start (EXP_FLOOR: unflushed AVX-512 lanes), the keys after them weighted by a scalar exp."""
    B, H, T, Dh = q.shape
    S = P + T
    per = -(-S // splits)
    out = np.zeros((B, H, T, Dh), np.float32)
    scale = np.float32(1 / np.sqrt(Dh))
    for b in range(B):
        for h in range(H):
            scores = (kc[b, h, :S] @ q[b, h].T).astype(np.float32) * scale  # [S, T]
            for t in range(T):
                sees = P + t + 1
                parts = []
                for first in range(0, S, per):
                    limit = min(first + per, S, sees)  # the keys of this part the query sees
                    m, l, a = np.float32(start), np.float32(0), np.zeros(Dh, np.float32)
                    for j0 in range(first, limit, tile):
                        j1 = min(j0 + tile, limit)
                        if not last_tile and j1 - j0 < tile:
                            break
                        s = scores[j0:j1, t]
                        new = max(m, s.max())
                        factor = np.exp(m - new)
                        w = np.exp(s - new)
                        if floor:
                            whole = (j1 - j0) // LANES * LANES
                            w[:whole] = np.maximum(w[:whole], np.float32(floor))
                        l = (l * factor if rescale_l else l) + w.sum()
                        a = (a * factor if rescale_acc else a) + w @ vc[b, h, j0:j1]
                        m = new
                    parts.append((m, l, a))
                top = max(m for m, _, _ in parts)
                with np.errstate(invalid="ignore", divide="ignore"):  # a part that saw no key: NaN, as a kernel's
                    weights = [np.exp(m - top) if maxima else np.float32(1) for m, _, _ in parts]
                    out[b, h, t] = sum(w * a for w, (_, _, a) in zip(weights, parts)) / sum(
                        w * l for w, (_, l, _) in zip(weights, parts))
    return out
