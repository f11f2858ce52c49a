"""Step 18's references in numpy: the ragged paged batches the learner's attention kernel runs on, what it must
compute (in float64) and leave in the pool, and the batched product's cases.

    kernel_cases()                  Case: each request's cached positions and new rows, the page size, the
                                    heads, the pool's size, which requests share their first pages
    case_arrays(case, seed)         q, k, v [T, H, D], blocks [pages, 2, L, PAGE, H, D], cache_lengths [B],
                                    lookup [B, max_pages], offsets [B + 1], layer [1] (the kernel's inputs)
    positions(arrays)               each row's request and position: [T] each
    gathered(blocks, lookup, ...)   a request's keys or values [S, H, D], read through its page table
    expected(*arrays)               the output [T, H, D] and the pool after the call
    product_cases()                 (name, M, K, N): the batched product's shapes
    rounded_product(rounding, x, w, b)  y [M, N]: the product with x and w rounded as a kernel may round
                                    them to multiply faster (ROUNDINGS), in float64
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from checker.reporting.compare import Tolerance
from runtime.quantize import dequantize, quantize

# float32 dot products of D = 64 and sums of up to 1024 weights against float64, as step 17's kernel (the same
# online softmax): the solution stays under a tenth of it; a mistake is off by a hundredth of the output or more.
KERNEL = Tolerance(2e-4, 2e-4)
# x @ dequantize(q, scales).T in float32 sums of K = 3072 terms, in another order than numpy's float64: the
# solution stays under a hundredth of it; a wrong block, row or scale is off by the output's own size.
PRODUCT = Tolerance(1e-4, 1e-4)
D = 64  # GPT-2 small's head_dim
LAYERS = 2  # layers of the test pool; the kernel is called for LAYER
LAYER = 1  # the layer the cases' calls store into and read: the other layer must stay as it was


class Case(NamedTuple):
    name: str
    cached: tuple[int, ...]  # positions each request has in its pages before the call
    new: tuple[int, ...]  # its new rows in the call
    page: int  # positions a page holds
    heads: int
    shared: int = 0  # requests 0 and 1 share their first `shared` pages (a prefix both prompts begin with)
    spare: int = 3  # pages of the pool no request owns


def kernel_cases() -> list[Case]:
    """Ragged paged batches chosen to find the classic bugs: pages out of order in the pool (always: the pool is
    shuffled), a page boundary inside a chunk and at its last row, a request of one position and one of the whole
    context, a decode row beside a 100-row chunk, a batch of 1 and of 32, two requests sharing prefix pages, page
    sizes other than 128, a chunk shorter than a band of 8 or of 16 rows (a vector's) before another request's
    rows, its task the slowest (a band that stores past its rows does so after the next request's are stored), one
    head alone at decode (the threads split its keys; one with fewer keys than threads)."""
    rng = np.random.default_rng(18)
    return [
        Case("one prompt of 20 rows, pages of 16", (0,), (20,), 16, 2),
        Case("a chunk of 15 after 17 cached: its last row ends a page", (17,), (15,), 16, 2),
        Case("a decode row beside a 100-row chunk", (37, 0), (1, 100), 16, 2),
        Case("32 decoding requests", tuple(int(c) for c in rng.integers(1, 70, 32)), (1,) * 32, 16, 2),
        Case("a request of one position beside one of the whole context", (0, 1000), (1, 24), 128, 2),
        Case("two requests sharing their first 2 pages", (40, 36), (5, 3), 16, 2, shared=2),
        Case("pages of 32: three chunks and a decode", (0, 5, 31, 64), (9, 40, 2, 1), 32, 3),
        Case("one head: a chunk of 5 rows after 1000 cached, then a prompt of 21 (a band of a vector's rows cut "
             "short, the slowest task)", (1000, 0), (5, 21), 16, 1),
        Case("GPT-2's 12 heads: two decodes and a prompt, pages of 128", (130, 7, 0), (1, 1, 12), 128, 12),
        Case("one head decoding after 300 cached (a kernel that splits a head's keys across idle threads splits "
             "here)", (300,), (1,), 16, 1),
        Case("one head decoding its first position (split, fewer keys than threads)", (0,), (1,), 16, 1),
    ]


def case_arrays(case: Case, seed: int) -> list[np.ndarray]:
    """The kernel's inputs for `case`: q, k, v [T, H, D] float32, blocks [pages, 2, LAYERS, PAGE, H, D] float32
    (the cached positions' keys and values, noise or NaN elsewhere), cache_lengths [B] uint32,
    lookup [B, max_pages] uint32 (a shuffled pool; the entries past a request's pages name a page no request
    owns, as MAX pads its table, and is the pool's last), offsets [B + 1] uint32, layer [1] uint32. The layer's
    slots a right kernel never reads before it stores there hold NaN: the pages no request owns, each request's
    positions from its cache length on (the new rows' slots until they are stored)."""
    rng = np.random.default_rng([seed, *map(len, (case.cached, case.new)), case.page, case.heads,
                                 sum(case.cached), sum(case.new)])
    B, H, P = len(case.cached), case.heads, case.page
    needs = [-(-(c + n) // P) for c, n in zip(case.cached, case.new)]
    own = [n - (case.shared if b == 1 else 0) for b, n in enumerate(needs)]  # request 1 owns none of the shared
    pages = sum(own) + case.spare
    order = rng.permutation(pages)  # pages out of order in the pool
    last = np.argmax(order)
    order[[last, -1]] = order[[-1, last]]  # the table's padding page (order[-1]) is the pool's last in memory
    width = max(needs) + 1
    lookup = np.full((B, width), order[-1], np.uint32)  # past a request's pages: a spare page, as MAX pads
    used = 0
    for b in range(B):
        start = case.shared if b == 1 else 0
        if b == 1:
            lookup[1, :start] = lookup[0, :start]
        lookup[b, start:needs[b]] = order[used:used + own[b]]
        used += own[b]
    blocks = rng.standard_normal((pages, 2, LAYERS, P, H, D)).astype(np.float32)
    # NaN where a right kernel never reads (before storing there): a row that reads one comes out NaN. With the
    # padding page last, a read past an owned page's end stays inside the pool (the other layer's noise, or NaN),
    # never in memory another task writes.
    unread = np.ones((pages, P), bool)  # [page, slot]
    for b in range(B):
        unread[slots(lookup, b, case.cached[b], P)] = False
    blocks[:, :, LAYER].transpose(0, 2, 1, 3, 4)[unread] = np.nan
    T = sum(case.new)
    q, k, v = (rng.standard_normal((T, H, D)).astype(np.float32) for _ in range(3))
    offsets = np.concatenate([[0], np.cumsum(case.new)]).astype(np.uint32)
    return [q, k, v, blocks, np.array(case.cached, np.uint32), lookup, offsets, np.array([LAYER], np.uint32)]


def positions(offsets: np.ndarray, cache_lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's request and its position in that request: request [T], position [T]."""
    lengths = np.diff(offsets.astype(np.int64))
    request = np.repeat(np.arange(len(lengths)), lengths)
    position = np.arange(int(offsets[-1])) - offsets[request].astype(np.int64) + cache_lengths[request].astype(np.int64)
    return request, position


def slots(lookup: np.ndarray, b: int, count: int, page: int) -> tuple[np.ndarray, np.ndarray]:
    """Request b's positions 0 .. count - 1 in the pool: (page [count], slot [count])."""
    j = np.arange(count)
    return lookup[b, j // page].astype(np.int64), j % page


def gathered(blocks: np.ndarray, lookup: np.ndarray, b: int, count: int, kv: int, layer: int = LAYER) -> np.ndarray:
    """Request b's keys (kv 0) or values (1) at positions 0 .. count - 1, read through its page table: [S, H, D]."""
    page, slot = slots(lookup, b, count, blocks.shape[3])
    return blocks[page, kv, layer, slot]


def stored(k, v, blocks, cache_lengths, lookup, offsets, layer=LAYER) -> np.ndarray:
    """The pool after the new rows' keys and values are written at their positions (nothing else changes)."""
    return stored_at(k, v, blocks, lookup, *positions(offsets, cache_lengths), layer)


def stored_at(k, v, blocks, lookup, request, position, layer=LAYER) -> np.ndarray | None:
    """The pool after each row's key and value are written at `position` [T] of its `request` [T]; None when a
    position is outside its request's page table."""
    P = blocks.shape[3]
    if (position < 0).any() or (position // P >= lookup.shape[1]).any():
        return None
    after = blocks.copy()
    page = lookup[request, position // P].astype(np.int64)
    after[page, 0, layer, position % P] = k
    after[page, 1, layer, position % P] = v
    return after


def attend(q, blocks, cache_lengths, lookup, offsets, lo, hi, *, layer=LAYER, scale: float | None = None,
           read=None, counted=None):
    """Every row's attention over its request's positions lo(p, end) .. hi(p, end) - 1 of the pool (p: the row's
    position, end: its request's positions after the call): [T, H, D] in float64, NaN for a row that sees no key.
    `read(keys, values)`, when given, gives the keys and values [S, H, D] attended over instead of those read;
    `counted(p, end)`, when given, ends the keys whose weights the sum divides by (not those it weights)."""
    request, position = positions(offsets, cache_lengths)
    out = np.full(q.shape, np.nan)
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    for b in range(len(cache_lengths)):
        rows = np.flatnonzero(request == b)
        if not len(rows):
            continue
        end = int(position[rows].max()) + 1
        keys = gathered(blocks, lookup, b, end, 0, layer).astype(np.float64)  # [S, H, D]
        values = gathered(blocks, lookup, b, end, 1, layer).astype(np.float64)
        if read is not None:
            keys, values = read(keys, values)
        for r in rows:
            a, z = max(lo(int(position[r]), end), 0), min(hi(int(position[r]), end), end)
            c = z if counted is None else min(counted(int(position[r]), end), end)
            if z <= a or c <= a:
                continue
            s = np.einsum("hd,shd->hs", q[r].astype(np.float64), keys[a:max(z, c)]) * scale
            w = np.exp(s - s[:, :z - a].max(-1, keepdims=True))
            out[r] = np.einsum("hs,shd->hd", w[:, :z - a] / w[:, :c - a].sum(-1, keepdims=True), values[a:z])
    return out


def causal(q, blocks, cache_lengths, lookup, offsets, layer=LAYER) -> np.ndarray:
    """The right attention over a pool that already holds the new rows: row at position p sees 0 .. p."""
    return attend(q, blocks, cache_lengths, lookup, offsets, lambda p, end: 0, lambda p, end: p + 1, layer=layer)


def expected(q, k, v, blocks, cache_lengths, lookup, offsets, layer) -> tuple[np.ndarray, np.ndarray]:
    """What the kernel must compute: the output [T, H, D] (float64) and the pool after the call."""
    after = stored(k, v, blocks, cache_lengths, lookup, offsets, int(layer[0]))
    return causal(q, after, cache_lengths, lookup, offsets, int(layer[0])), after


def product_cases() -> list[tuple[str, int, int, int]]:
    """(name, M, K, N): M = 1, 2, 7, 16, 64 rows on GPT-2's shapes (c_attn, c_proj, the MLP's two, the tied head's
    50257 rows), and K no multiple of 32 (a partial last block) for a few rows, a dozen and more: a kernel that
    computes a small batch one way and a large one another is checked on each way and its leftover rows; and a
    prompt's 128 rows (x of 98304 values and more: work a kernel may share out differently at that size), once with
    fewer columns than rows, so that work shared out by columns leaves rows of x out."""
    return [("M=1, c_attn 768 -> 2304", 1, 768, 2304), ("M=2, attention's c_proj 768 -> 768", 2, 768, 768),
            ("M=7, mlp.c_proj 3072 -> 768", 7, 3072, 768), ("M=16, mlp.c_fc 768 -> 3072", 16, 768, 3072),
            ("M=64, c_attn 768 -> 2304", 64, 768, 2304), ("M=5, K=100 (a last block of 4), N=13", 5, 100, 13),
            ("M=3, K=100, N=13", 3, 100, 13), ("M=13, K=100, N=37", 13, 100, 37),
            ("M=16, the head 768 -> 50257 (N odd)", 16, 768, 50257),
            ("M=128, a prompt's c_attn 768 -> 2304", 128, 768, 2304),
            ("M=128, a prompt's mlp.c_proj 3072 -> 768 (more rows of x than tiles of 32 columns)", 128, 3072, 768)]


def bfloat16(a: np.ndarray) -> np.ndarray:
    """a rounded to bfloat16 (float32's top 16 bits: 8 significant bits), to the nearest, ties to even; as float32."""
    bits = np.ascontiguousarray(a, np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).view(np.float32)


def int8_blocks(x: np.ndarray) -> np.ndarray:
    """x [M, K] as llama.cpp's Q8_0 holds it: step 16's quantisation and back (per block of 32 columns a scale
    max|x| / 127, each value its scale times round(x / scale)); as float32."""
    return dequantize(*quantize(x))


# The ways a kernel may round what it multiplies, to multiply faster: x to bfloat16 (AVX-512's vdpbf16ps) or to
# int8 per block of 32 (llama.cpp's Q8_0, VNNI's vpdpbusd), the weights (q times its scale) to bfloat16. Products
# that equal one of these on every case pass, and the model is held to it (checker.steps.step18.rounded).
ROUNDINGS = {
    "x in bfloat16": (bfloat16, None),
    "x and w in bfloat16": (bfloat16, bfloat16),
    "w in bfloat16": (None, bfloat16),
    "x in int8 per block of 32": (int8_blocks, None),
    "x in int8 per block of 32, w in bfloat16": (int8_blocks, bfloat16),
}


def rounded_product(rounding: str, x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """x' @ w'.T + b [M, N] in float64, x [M, K] and w [N, K] (float32, the dequantised weights) rounded as
    ROUNDINGS[rounding]."""
    rx, rw = ROUNDINGS[rounding]
    return (rx(x) if rx else x).astype(np.float64) @ (rw(w) if rw else w).astype(np.float64).T + b
