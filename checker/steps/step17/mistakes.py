"""Step 17's catalogue: attention kernels a learner may write instead of the right one, each with what it
computes from a case's arrays (its output, and the caches it leaves) and the edit that makes it in the
solution's Mojo. The online softmax's mistakes depend on how a kernel cuts the keys: they are computed for
each tile size and split count a learner may choose (TILES, SPLITS), and a mistake is named when one way
of cutting explains every case.

    compute(q, k, v, k_cache, v_cache, P, tile, splits, floor) -> (output [B, H, T, D], k_cache, v_cache after)

`floor` is the least weight the kernel's exp gives (reference.EXP_FLOOR: 16 lanes without a denormal
flush), a third way a kernel's cutting may differ.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

from checker.reporting.compare import Edit, Mistake
from checker.steps.step17.reference import EXP_FLOOR, attention, online, written

KERNEL = "flash.mojo"
TILES = (1, 8, 16, 32, 64, 128)  # keys a tile: a wrong online softmax depends on where its tiles start
# parts a decode head's keys are split into (1: not split): a few counts, and this machine's cores, which a
# kernel splitting by num_logical_cores() uses
SPLITS = tuple(sorted({1, 2, 3, 4, 8, os.cpu_count() or 1}))


class Fill(NamedTuple):
    """A decode head's keys cut into as many parts as fill `threads` with the heads of the batch, at most one
    part a tile: ceil(threads / (B x H)), as a kernel splitting by num_logical_cores() cuts them (then the
    heads alone fill the threads of a whole GPT-2 layer, and only a batch of few heads is split)."""
    threads: int


def _online(**flags):
    """A mistake of the online softmax alone (the caches written right): `online` with `flags`."""
    def both(q, k, v, kc, vc, P, tile, splits, floor=0.0):
        kc, vc = written(k, v, kc, vc, P)
        return online(q, kc, vc, P, tile, splits, floor=floor, **flags), kc, vc
    return both


def _attention(**flags):
    """A mistake of which keys a query sees or how its scores are scaled (the caches written right):
    `attention` with `flags`, however the kernel cuts the keys."""
    def both(q, k, v, kc, vc, P, tile, splits, floor=0.0):
        kc, vc = written(k, v, kc, vc, P)
        return attention(q, kc, vc, P, **flags), kc, vc
    return both


def _not_written(q, k, v, kc, vc, P, tile, splits, floor=0.0):
    return attention(q, kc, vc, P), kc.copy(), vc.copy()


def _swapped(q, k, v, kc, vc, P, tile, splits, floor=0.0):
    kc, vc = written(v, k, kc, vc, P)  # v into the key cache, k into the value cache
    return attention(q, kc, vc, P), kc, vc


NO_RESCALE = Mistake(
    "no-rescale", "when a tile's largest score is above the running maximum, the running sum and the accumulator "
    "were not multiplied by exp(m_old - m_new): what was summed against the old maximum stays too large",
    "Each time m grows to m', l and the accumulator become l x exp(m - m') and acc x exp(m - m') before the "
    "tile's own terms are added.",
    _online(rescale_l=False, rescale_acc=False),
    Edit("var factor = exp(m - new_m)  # what was summed against the old maximum, rescaled",
         "var factor = Float32(1)", file=KERNEL))
SUM_NOT_RESCALED = Mistake(
    "sum-not-rescaled", "when a tile's largest score is above the running maximum, the accumulator was multiplied "
    "by exp(m_old - m_new) but the running sum l was not: l stays too large, and every weight too small",
    "l and the accumulator are two halves of one fraction: when m grows to m', both are multiplied by "
    "exp(m - m').",
    _online(rescale_l=False),
    Edit("l = l * factor", "l = l + 0", file=KERNEL))
ACC_NOT_RESCALED = Mistake(
    "acc-not-rescaled", "when a tile's largest score is above the running maximum, the running sum l was multiplied "
    "by exp(m_old - m_new) but the accumulator was not: the values summed before stay too heavy",
    "l and the accumulator are two halves of one fraction: when m grows to m', both are multiplied by "
    "exp(m - m'), the accumulator's every lane.",
    _online(rescale_acc=False),
    Edit("acc[e] = acc[e] * factor", "acc[e] = acc[e] + 0", file=KERNEL))
MAX_FROM_ZERO = Mistake(
    "max-from-zero", "the running maximum starts at 0, not -infinity: a query whose scores are all far below 0 "
    "has every exp(s - 0) underflow, and its output is 0 / 0 (or, where exp's vectors give their least value "
    "instead of 0, the plain mean of the values those vectors weighted)",
    "Start m at the lowest float (Float32.MIN, or -inf): the first tile's largest score then becomes the maximum.",
    _online(start=0.0),
    Edit("var m, l = NEG_INF, Float32(0)", "var m, l = Float32(0), Float32(0)", file=KERNEL))
MASK_NOT_OFFSET = Mistake(
    "mask-not-offset", "new query t sees keys 0 .. t, not 0 .. P + t: the P cached positions before it are "
    "counted as if the new ones began at 0",
    "Query t is position P + t: it sees every cached key and the new ones up to itself, keys 0 .. P + t.",
    _attention(offset=False),
    Edit("var limit = min(end, P + t + 1)", "var limit = min(end, t + 1)", file=KERNEL))
UNSCALED = Mistake(
    "unscaled", "the scores are not divided by sqrt(D): q . k, not q . k / sqrt(D)",
    "Scale each score by 1 / sqrt(head_dim) (or scale q once, before its dot products).",
    _attention(scale=1.0),
    Edit("qv[e] = qp.unsafe_load[width=W]((head * T + t) * D + e * W) * scale",
         "qv[e] = qp.unsafe_load[width=W]((head * T + t) * D + e * W)", file=KERNEL))
LAST_TILE = Mistake(
    "last-tile-skipped", "the keys after the last whole tile are left out: a query whose keys are no multiple of "
    "the tile misses its last ones (and a query with fewer keys than a tile sees none)",
    "Go over the keys while a tile starts before the last: the last tile holds the keys left, fewer than a tile.",
    _online(last_tile=False),
    Edit("while j0 < limit:", "while j0 + TILE <= limit:", file=KERNEL))
SPLITS_WITHOUT_MAXIMA = Mistake(
    "splits-without-maxima", "the parts of a head's keys were combined as sum acc_s / sum l_s, each still summed "
    "against its own maximum: right only where every part saw the same largest score",
    "With m = max m_s, scale each part's l_s and acc_s by exp(m_s - m) before adding them.",
    _online(maxima=False),
    Edit("var weight = exp(ms[unsafe_offset=at] - top)", "var weight = Float32(1)", file=KERNEL))
CACHE_NOT_WRITTEN = Mistake(
    "cache-not-written", "the new keys and values were not written into the caches: their positions still hold "
    "what was there before, for this call and every later one",
    "Before attending, store k[b, h, t] and v[b, h, t] at position P + t of k_cache and v_cache.",
    _not_written,
    Edit(("        if T > 1:  # prefill: every band reads keys other bands' queries bring, so all are stored first\n"
          "            sync_parallelize(store, heads)\n",
          "                store(head)\n"),
         ("", "                pass\n"), file=KERNEL))
CACHE_SWAPPED = Mistake(
    "cache-swapped", "the new keys were written into the value cache and the new values into the key cache",
    "k goes to k_cache, v to v_cache: the order of the op's inputs is q, k, v, k_cache, v_cache, past.",
    _swapped,
    Edit(("kc.unsafe_store(to + e, kp.unsafe_load[width=W](source + e).cast[k_cache.dtype]())",
          "vc.unsafe_store(to + e, vp.unsafe_load[width=W](source + e).cast[k_cache.dtype]())"),
         ("kc.unsafe_store(to + e, vp.unsafe_load[width=W](source + e).cast[k_cache.dtype]())",
          "vc.unsafe_store(to + e, kp.unsafe_load[width=W](source + e).cast[k_cache.dtype]())"), file=KERNEL))

# Those whose output depends on how the kernel cuts the keys, and those that do not; those known by the caches
# they leave alone (their output depends on when a task reads what another writes).
CUT = [NO_RESCALE, SUM_NOT_RESCALED, ACC_NOT_RESCALED, MAX_FROM_ZERO, LAST_TILE, SPLITS_WITHOUT_MAXIMA]
WHOLE = [MASK_NOT_OFFSET, UNSCALED, CACHE_NOT_WRITTEN, CACHE_SWAPPED]
BY_CACHES = [CACHE_NOT_WRITTEN, CACHE_SWAPPED]
# Those the kernel's readings name (checker.steps.step17.reading: a bound moved, a scale), by the same path as a
# mistake nobody listed
READ = [MASK_NOT_OFFSET, UNSCALED]
CATALOGUE = [*WHOLE, *CUT]


def cuts(mistake: Mistake) -> list[tuple[int, int | Fill, float]]:
    """The ways of cutting the keys (tile, splits, floor) that may change what `mistake` computes: a split
    count for every decode case alike, or one that fills the threads (Fill); exp's least weight, 0 or
    EXP_FLOOR."""
    if mistake not in CUT:
        return [(TILES[0], 1, 0.0)]
    return [(tile, splits, floor) for floor in (0.0, EXP_FLOOR) for tile in TILES
            for splits in (*SPLITS, *(Fill(n) for n in SPLITS if n > 1))]


def output(mistake: Mistake, arrays: list[np.ndarray], tile: int, splits: int | Fill, floor: float = 0.0):
    """What `mistake` computes on one case's arrays, its keys cut in tiles of `tile` and (at decode, the
    only place a kernel splits a head's keys) in parts as `splits` says, exp's least weight `floor`."""
    q, k, v, kc, vc, past = arrays
    B, H, T, _ = q.shape
    if T > 1:
        parts = 1
    elif isinstance(splits, Fill):
        parts = max(1, min(-(-splits.threads // (B * H)), -(-(int(past[0]) + 1) // tile)))
    else:
        parts = splits
    # combined without their maxima, each part's own softmax is exact however it is tiled: the tile only caps
    # the parts, and the widest keeps the numpy fast
    return mistake.compute(q, k, v, kc, vc, int(past[0]), TILES[-1] if mistake is SPLITS_WITHOUT_MAXIMA else tile,
                           parts, floor)
