"""Steps 15 and 16's products read from what they computed, when no catalogued mistake explains them: what
each output added for its bias, which row of x and of w each output was computed from, and (step 16) which
scale each block was multiplied by. Each reading holds on every case or says nothing.

    bias_reading(cases, results, arrays)     the product right, the bias part read: how many times each
                                             case adds b (a count that follows K % 8 is a tail's loop), or
                                             which b[j] each output adds; (line, catalogued mistake) or None
    index_reading(cases, results, arrays)    every output equal to another output's product: which row of x
                                             and of w it was computed from, as an index expression
    scale_reading(cases, results, packed)    step 16: each output the sum of its blocks' products, each
                                             block scaled by another scale than its own (another block's,
                                             another row's, 1 / scale) or summed otherwise: which
    terms_reading(cases, results, arrays)    each output its row's products with each column counted a whole
                                             number of times (solved for): which columns are not counted once
    store_stride(cases, results, arrays)     y[n, m] found at n * S + m, S another number than M (K, N):
                                             where the kernel stores a row of y, read from where each of
                                             its right values landed (two rows overlap: a race there)
    readings(cases, results, arrays, known)  the lines the above give, and the catalogued mistake named

`arrays` {name: (x, w, b)} (w: the weights the kernel multiplies by, dequantised for step 16); `packed`
{name: (x, q, scales, b)}; `results` {name: [R, N, M]}.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from checker.diagnosis.reading import Dimension, Variant, first_variant, follows
from checker.reporting.compare import Mistake, ranges
from checker.steps.step15.mistakes import BIAS_HINT
from checker.steps.step15.reference import KERNEL, WIDTHS, expected
from runtime.quantize import BLOCK

# What a per-case count may follow: the columns of a tail (K % W), the vectors of a row (K // W), ...
COUNTS = [*(Dimension(f"K % {w}", f"the columns left after a row's whole vectors of {w} (its tail)", f"K%{w}")
            for w in WIDTHS),
          *(Dimension(f"K // {w}", f"a row's whole vectors of {w}", f"K//{w}") for w in WIDTHS),
          Dimension("ceil(K / 32)", "a row's blocks", "KB"), Dimension("N", "the rows of x", "N")]


def _features(cases) -> dict[str, np.ndarray]:
    """Each case's numbers a count may follow."""
    feats = {f"K%{w}": [k % w for _, _, k, _, _ in cases] for w in WIDTHS}
    feats.update({f"K//{w}": [k // w for _, _, k, _, _ in cases] for w in WIDTHS})
    feats.update(KB=[-(-k // BLOCK) for _, _, k, _, _ in cases], N=[n for _, n, _, _, _ in cases])
    return {key: np.array(v) for key, v in feats.items()}


def _product(x, w) -> np.ndarray:
    return x.astype(np.float64) @ w.astype(np.float64).T


def bias_reading(cases, results: dict, arrays: dict, known: dict[int, Mistake]) -> tuple[str, Mistake | None] | None:
    """When every output is its product plus something made of b: how many times b was added on each case
    (a count the step's catalogue knows, `known` {count: mistake}; another, constant or following one of the
    case's numbers), or which b[j] each output added (one of INDICES). None when the products are not
    right, or the bias is."""
    biased = [case for case in cases if arrays[case[0]][2] is not None]
    added, allowed = {}, {}
    for name, *_ in biased:
        x, w, b = arrays[name]
        added[name] = results[name][0].astype(np.float64) - _product(x, w)  # [N, M]: what each output added
        allowed[name] = KERNEL.allowed(expected(x, w, b))
    counts = {}  # each case's count, row by row of x
    for name, *_ in biased:
        b = arrays[name][2].astype(np.float64)
        with np.errstate(invalid="ignore"):
            c = np.rint((added[name] * b).sum(-1) / (b * b).sum())  # [N]
            if not (np.abs(added[name] - c[:, None] * b) <= allowed[name]).all():
                break
        counts[name] = c.astype(int)
    else:
        return _counted_bias(cases, biased, counts, known)
    for words, expr in INDICES:
        if all(_fits(added[name], arrays[name][2], expr, allowed[name]) for name, *_ in biased):
            return f"the products are right and each output adds the bias b[{words}], not b[m]", None
    return None


def _fits(added: np.ndarray, b: np.ndarray, expr: Callable, allowed: np.ndarray) -> bool:
    """Output (n, m) added b[expr(n, m)] (an index outside b reads NaN, as the check's guard holds)."""
    N, M = added.shape
    j = np.broadcast_to(expr(np.arange(N)[:, None], np.arange(M)[None, :], N, M), (N, M))
    read = np.where((j >= 0) & (j < M), b[np.clip(j, 0, M - 1)], np.nan)
    with np.errstate(invalid="ignore"):
        return bool((np.abs(added - read) <= allowed).all())


def _counted_bias(cases, biased, counts: dict, known: dict[int, Mistake]) -> tuple[str, Mistake | None] | None:
    """What the counts of b each case's rows added say."""
    every = {int(c) for row in counts.values() for c in row}
    if every == {1}:
        return None
    if len(every) == 1:
        c = every.pop()
        if c in known:
            return known[c].says, known[c]
        return f"the bias is added {c} times to each output, not once", Mistake(
            "bias-times", f"the bias is added {c} times to each output, not once",
            BIAS_HINT + " A SIMD accumulator that starts at b[m] adds it once per lane.")
    first = np.array([counts[case[0]][0] for case in biased], np.float64)  # each case's row 0
    listed = ", ".join(f"{int(c)} on K = {case[2]}" for c, case in zip(first, biased))
    rows = [f"{list(map(int, counts[case[0]]))} on the rows of {case[0]}" for case in biased if
            len(set(counts[case[0]])) > 1]
    later = f" (and not the same on every row: {'; '.join(rows)})" if rows else ""
    feats = {key: v[[cases.index(case) for case in biased]] for key, v in _features(cases).items()}
    if (found := follows(first, feats, COUNTS)) is not None:
        said, dim = found
        return (f"the products are right and the bias is added {said} times to each output of row 0 ({listed})"
                f"{later}: as many times as {dim.meaning}, so it is added inside a loop over them. {BIAS_HINT}"), None
    return (f"the products are right and each output adds the bias a number of times that changes with the shape "
            f"({listed}){later}. {BIAS_HINT}"), None


# Index expressions a learner's index may compute instead of m: (words, j(n, m, N, M)).
INDICES = [("m = 0", lambda n, m, N, M: 0 * m), ("n (the row of x)", lambda n, m, N, M: n + 0 * m),
           ("m + 1", lambda n, m, N, M: m + 1), ("m - 1", lambda n, m, N, M: m - 1),
           ("M - 1 - m", lambda n, m, N, M: M - 1 - m),
           *((f"m - m % {r} (the first of each group of {r})", lambda n, m, N, M, r=r: m - m % r)
             for r in (2, 4, 8, 16, 32))]


def _index_said(maps: dict[str, np.ndarray], cases, tensor: str) -> str | None:
    """What index each output read of `tensor` ({case: [N, M] the index read}), as an expression of (n, m)
    that holds on every case, or as examples from the first case where it is not the right one."""
    shapes = {name: (n, m) for name, n, _, m, _ in cases}
    if all(np.array_equal(j, np.broadcast_to(np.arange(shapes[name][1]), j.shape)) for name, j in maps.items()):
        return None
    for words, expr in INDICES:
        if all(np.array_equal(j, np.broadcast_to(expr(np.arange(shapes[name][0])[:, None],
                                                      np.arange(shapes[name][1])[None, :], *shapes[name]), j.shape))
               for name, j in maps.items()):
            return f"output m reads {tensor}[{words}], not {tensor}[m]"
    name, j = next((name, j) for name, j in maps.items()
                   if not np.array_equal(j, np.broadcast_to(np.arange(shapes[name][1]), j.shape)))
    wrong = np.argwhere(j != np.arange(j.shape[1])[None, :])[:4]
    return (f"on {name}, " + ", ".join(f"output {m} of row {n} reads {tensor}[{j[n, m]}]" for n, m in wrong)
            + f", where each output m reads {tensor}[m]")


def index_reading(cases, results: dict, arrays: dict) -> str | None:
    """When every output of every case (the small ones: M up to 64) is the product of some row of x and
    some row of w, plus that output's bias: which rows, said as index expressions, when another than its
    own; None otherwise."""
    small = [case for case in cases if case[3] <= 64]
    rows_x, rows_w = {}, {}
    for name, n, k, m, _ in small:
        x, w, b = arrays[name]
        y, allowed = results[name][0].astype(np.float64), KERNEL.allowed(expected(x, w, b))
        product = y - (0 if b is None else b)  # [N, M]
        every = _product(x, w)  # [N, M]: row i of x against row j of w
        close = np.abs(product[:, :, None, None] - every[None, None]) <= allowed[:, :, None, None]  # [N, M, N, M]
        if not close.reshape(n, m, -1).any(axis=-1).all():
            return None
        own = close[np.arange(n)[:, None], np.arange(m)[None, :], np.arange(n)[:, None], np.arange(m)[None, :]]
        flat = np.where(own, (np.arange(n)[:, None] * m + np.arange(m)[None, :]), close.reshape(n, m, -1).argmax(-1))
        rows_x[name], rows_w[name] = flat // m, flat % m
    said = [s for s in (_index_said(rows_w, small, "w's row"),
                        _rows_of_x(rows_x, small)) if s]
    if not said:
        return None
    return "each output is the product of a row of x and a row of w, but not always its own: " + "; ".join(said)


def _rows_of_x(rows_x: dict, cases) -> str | None:
    """Which row of x each output read, when not its own row n."""
    for name, n, *_ in cases:
        if not np.array_equal(rows_x[name], np.broadcast_to(np.arange(n)[:, None], rows_x[name].shape)):
            if all((rows_x[c[0]] == 0).all() for c in cases):
                return "every row of y reads x's row 0: x's row n starts at n * K"
            return f"on {name}, row n of y reads x's rows {rows_x[name][:, 0].tolist()}, not 0 .. {n - 1}"
    return None


def _blocks(x, q, s) -> tuple[np.ndarray, np.ndarray]:
    """Each block's product before its scale, [N, M, KB], and x's columns of each block as slices."""
    K, KB = q.shape[1], s.shape[1]
    parts = np.stack([x[:, j * BLOCK:(j + 1) * BLOCK].astype(np.float64) @
                      q[:, j * BLOCK:(j + 1) * BLOCK].astype(np.float64).T for j in range(KB)], axis=-1)
    return parts, K


def _scaled_by(pick: Callable, partial: bool = True):
    """y when block j of row m is multiplied by pick(s, at, m, j) (`at(i)`: the scales in memory, NaN past
    either end as the check's guard holds) instead of s[m, j]: every block, or (not `partial`) the whole
    blocks only, the last, partial one by its own."""
    def compute(x, q, s, b):
        parts, K = _blocks(x, q, s)
        M, KB = s.shape
        flat = np.concatenate([np.full(KB * M, np.nan), s.reshape(-1).astype(np.float64), np.full(KB * M, np.nan)])
        m, j = np.arange(M)[:, None], np.arange(KB)[None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = np.broadcast_to(pick(s.astype(np.float64), lambda i: flat[i + KB * M], m, j), (M, KB)).copy()
            if not partial and K % BLOCK:
                scale[:, -1] = s[:, -1]
            return (parts * scale[None]).sum(-1) + (0 if b is None else b)
    return compute


def _tail_scaled_by(pick: Callable):
    """y when the last, partial block (K no multiple of 32) is multiplied by pick(s, at, m) [M, 1] instead of
    its own (`at(i)`: the scales in memory, NaN past either end)."""
    def compute(x, q, s, b):
        if q.shape[1] % BLOCK == 0:
            return expected(x, q.astype(np.float64) * np.repeat(s, BLOCK, axis=1)[:, :q.shape[1]], b)
        M, KB = s.shape
        flat = np.concatenate([np.full(KB * M, np.nan), s.reshape(-1).astype(np.float64), np.full(KB * M, np.nan)])
        tail = pick(s, lambda i: flat[i + KB * M], np.arange(M)[:, None])
        scale = s.astype(np.float64)

        def scaled(s_, at, m, j):
            return np.concatenate([scale[:, :-1], np.broadcast_to(tail, (M, 1))], axis=1)
        return _scaled_by(scaled)(x, q, s, b)
    return compute


def _counted(part: Callable):
    """y when each output's sum is the sum of part(x, q, s) [N, M] instead of its blocks' products."""
    def compute(x, q, s, b):
        return part(x.astype(np.float64), q.astype(np.float64), s.astype(np.float64)) + (0 if b is None else b)
    return compute


def _first_vector_twice(width: int):
    def part(x, q, s):
        parts, K = _blocks(x, q, s)
        whole = K // BLOCK
        extra = np.stack([x[:, j * BLOCK:j * BLOCK + width] @ q[:, j * BLOCK:j * BLOCK + width].T
                          for j in range(whole)], -1) if whole else 0
        return (parts * s[None]).sum(-1) + ((extra * s[None, :, :whole]).sum(-1) if whole else 0)
    return part


def _last_whole_block_only(x, q, s):
    parts, K = _blocks(x, q, s)
    whole = K // BLOCK
    kept = [whole - 1] if whole else []
    kept += list(range(whole, s.shape[1]))  # and the partial block
    return (parts[..., kept] * s[None][..., kept]).sum(-1)


def _tail_from(start: Callable):
    """The last, partial block's columns read from start(whole, K) instead of whole * 32."""
    def part(x, q, s):
        parts, K = _blocks(x, q, s)
        whole = K // BLOCK
        if K % BLOCK == 0:
            return (parts * s[None]).sum(-1)
        first = start(whole, K)
        tail = x[:, first:K] @ q[:, first:K].T
        return (parts[..., :whole] * s[None, :, :whole]).sum(-1) + tail * s[None, :, -1]
    return part


def _tail_q_row_0(x, q, s):
    parts, K = _blocks(x, q, s)
    whole = K // BLOCK
    if K % BLOCK == 0:
        return (parts * s[None]).sum(-1)
    tail = x[:, whole * BLOCK:] @ q[:1, whole * BLOCK:].T  # [N, 1]: q's row 0 for every output
    return (parts[..., :whole] * s[None, :, :whole]).sum(-1) + tail * s[None, :, -1]


def _unsigned(where: str):
    """q read as unsigned bytes (a negative weight 256 more) in the whole blocks, the partial one, or both."""
    def part(x, q, s):
        K = q.shape[1]
        columns = np.arange(K) < K // BLOCK * BLOCK if where == "whole" else \
            np.arange(K) >= K // BLOCK * BLOCK if where == "partial" else np.ones(K, bool)
        read = np.where(columns[None] & (q < 0), q + 256.0, q)
        parts, _ = _blocks(x, read, s)
        return (parts * s[None]).sum(-1)
    return part


# How a row's blocks may be scaled instead: (words, pick(s, at, m, j) -> the scale of block j of row m)
PICKS = [
    ("block 0's scale, scales[m, 0]: the scale's index misses j", lambda s, at, m, j: s[:, :1]),
    ("scales[m, j - 1], the block before's", lambda s, at, m, j: at(m * s.shape[1] + j - 1)),
    ("scales[m, j + 1], the block after's", lambda s, at, m, j: at(m * s.shape[1] + j + 1)),
    ("the scales read as if they were [KB, M]: block j of row m's at j * M + m, not m * KB + j",
     lambda s, at, m, j: at(j * s.shape[0] + m)),
    ("row 0's scales, scales[0, j]: the scale's index misses m * KB", lambda s, at, m, j: s[:1]),
    ("1 / scale: divided by its scale, not multiplied (w ~= q x scale)", lambda s, at, m, j: 1 / s),
    ("its scale twice", lambda s, at, m, j: s * s),
]
SCALE_VARIANTS = [
    *((f"each block of a row multiplied by {words}", _scaled_by(pick)) for words, pick in PICKS),
    *((f"each whole block of a row multiplied by {words} (the last, partial block by its own)",
       _scaled_by(pick, partial=False)) for words, pick in PICKS),
    ("the last, partial block multiplied by the scale before its own in memory, at m * KB + whole - 1 (the block "
     "before's, or for a row of one block the row before's last), not m * KB + whole",
     _tail_scaled_by(lambda s, at, m: at(m * s.shape[1] + s.shape[1] - 2))),
    ("only the last whole block of each row and the partial one are summed: the sum over blocks is assigned "
     "(acc = ...) block after block, not added to (acc += ...)", _counted(_last_whole_block_only)),
    *((f"the first {w} columns of every whole block counted twice: the block's first vector added again by the "
       f"loop over its other vectors (which starts at {w})", _counted(_first_vector_twice(w))) for w in WIDTHS),
    ("the last, partial block's columns read from column whole = K // 32 (a block's index), not whole * 32",
     _counted(_tail_from(lambda whole, K: whole))),
    ("the last, partial block read from q's row 0 for every output: its index misses m * K", _counted(_tail_q_row_0)),
    *((f"q read as unsigned bytes (0 .. 255: every negative weight 256 more) {said}: int8 is -127 .. 127; "
       "convert with .cast[DType.float32]() from int8", _counted(_unsigned(where)))
      for where, said in (("whole", "in the whole blocks (the partial block read right)"),
                          ("partial", "in the last, partial block (the whole blocks read right)"),
                          ("all", "in every block"))),
]


def scale_reading(cases, results: dict, packed: dict) -> str | None:
    """Step 16: the first way of scaling or summing a row's blocks otherwise (SCALE_VARIANTS) that computes
    the learner's output on every case, in words; None when none does."""
    names = [case[0] for case in cases]
    got = {name: results[name][0] for name in names}
    variants = [Variant(words, lambda name, compute=compute: compute(*packed[name]))
                for words, compute in SCALE_VARIANTS]
    found = first_variant(names, got, variants, KERNEL, ("row", "output"))
    return None if found is None else f"your output is the int8 product with {found.says}, on every case"


def readings(cases, results: dict, arrays: dict, known: dict[int, Mistake], packed: dict | None = None,
             ) -> tuple[list[str], Mistake | None]:
    """What a product kernel's outputs are, read from them: its bias part, the rows each output read, and
    (`packed`, step 16) how its blocks were scaled; the lines and the catalogued mistake they name."""
    if (bias := bias_reading(cases, results, arrays, known)) is not None:
        return [bias[0]], bias[1]
    said = [s for s in (index_reading(cases, results, arrays),
                        scale_reading(cases, results, packed) if packed is not None else None) if s]
    return said, None


TERMS_ROWS = 4096  # rows of w a terms reading solves with (the head's first ones): plenty for K unknowns


def _columns_named(columns: np.ndarray, k: int, widths: tuple[int, ...], piece: str) -> str:
    """Columns of a row of K in a kernel's words: its last one, the tail after its whole `piece`s of one of
    `widths`, the whole ones before that tail, else their ranges."""
    cols = set(columns.tolist())
    if cols == {k - 1}:
        return "the last column (K - 1)"
    for tail in (True, False):  # the widths that cut K there, all named: the columns cannot tell them apart
        fit = [w for w in widths
               if 0 < k - k % w < k and cols == set(range(k - k % w, k) if tail else range(k - k % w))]
        if fit:
            start = k - k % fit[0]
            named = ", ".join(map(str, fit[:-1])) + " or " * (len(fit) > 1) + str(fit[-1])
            return (f"the {k - start} columns after the last whole {piece} of {named}" if tail else
                    f"every column of the whole {piece}s of {named} (0 .. {start - 1})")
    return f"columns {ranges(columns)}"


def _counted_as(count: int) -> str:
    return {0: "left out", 2: "counted twice", -1: "subtracted"}.get(count, f"counted {count} times")


def terms_reading(cases, results: dict, arrays: dict, widths: tuple[int, ...] = WIDTHS, piece: str = "vector"
                  ) -> str | None:
    """When each output of a failing shape is its row's product with each column j counted a whole number of
    times a_j, the same for every output (the bias once), solved for on every shape with more equations than
    columns: which columns are counted otherwise than once, in the kernel's words when they agree across the
    shapes read (a tail of K after whole `piece`s of one of `widths`). None when no failing shape can be read
    or one does not fit."""
    said = {}
    for name, n_rows, k, m, _ in cases:
        x, w, b = arrays[name]
        got, want = results[name][0].astype(np.float64), expected(x, w, b)
        if got.shape != want.shape or np.all(np.abs(got - want) <= KERNEL.allowed(want)):
            continue
        rows = min(m, TERMS_ROWS)
        if n_rows * rows < k + 8 or not np.isfinite(got).all():
            continue  # fewer equations than columns: nothing to read on this shape
        terms = (x.astype(np.float64)[:, None, :] * w.astype(np.float64)[None, :rows, :]).reshape(-1, k)
        target = (got[:, :rows] - (0 if b is None else b[:rows])).reshape(-1)
        counts, *_ = np.linalg.lstsq(terms, target, rcond=None)
        whole = np.rint(counts)
        fitted = terms @ whole
        if (np.abs(counts - whole).max() > 1e-3
                or np.any(np.abs(fitted - target) > KERNEL.allowed(want[:, :rows]).reshape(-1))):
            return None
        off = {int(c): np.flatnonzero(whole == c) for c in np.unique(whole) if c != 1}
        if not off:
            return None
        said[name] = "; ".join(f"{_columns_named(cols, k, widths, piece)} {_counted_as(c)}" for c, cols in off.items())
    if not said:
        return None
    if len(set(said.values())) == 1:
        where = next(iter(said))
        return (f"each output sums its row's products w[m, j] x[n, j] with {next(iter(said.values()))}, every "
                f"other column once, on {'every failing shape read so' if len(said) > 1 else where}"
                f"{' (' + '; '.join(said) + ')' if len(said) > 1 else ''}: a loop's bounds, or where its sum starts")
    return ("each output sums its row's products w[m, j] x[n, j], some columns otherwise than once: "
            + "; ".join(f"on {name}, {what}" for name, what in said.items()))


def store_stride(cases, results: dict, arrays: dict) -> str | None:
    """When on every failing shape with more than one row of x each right y[n, m] lies at n * S + m (its first
    run; where two (n, m) share a place, either), one S other than M on each, named by a dimension (K, N,
    M - 1, M + 1) the same on every one: the row stride y is stored with, in words. A shape whose later rows
    all fall past y's end at that stride agrees when its row 0 is right; another must show a later row."""
    strides, said = {}, {}
    for name, n_rows, k, m, _ in cases:
        want = expected(*arrays[name])
        got = results[name][0].astype(np.float64).reshape(-1)
        if n_rows < 2 or np.all(np.abs(got - want.reshape(-1)) <= KERNEL.allowed(want).reshape(-1)):
            continue
        named = {"K": k, "N": n_rows, "M - 1": m - 1, "M + 1": m + 1}
        fits = {label: fit for label, stride in named.items() if stride != m and (fit := _stored_at(got, want, stride))}
        if not fits:
            return None
        strides[name], said[name] = fits, named
    common = set.intersection(*(set(fits) for fits in strides.values())) if strides else set()
    label = next((label for label in ("K", "N", "M - 1", "M + 1") if label in common
                  and any(fits[label] == "seen" for fits in strides.values())), None)
    if label is None:
        return None
    values = "; ".join(f"{label} = {said[name][label]} on {name}" + (", its rows after the first past y's end"
                                                                     if strides[name][label] == "past" else "")
                       for name in strides)
    stride = f"({label})" if " " in label else label
    return (f"where y's rows are stored: each right output y[n, m] lies at n * {stride} + m ({values}), not at n * M "
            f"+ m: the row stride of y's index is {label} where it is M (y is [N, M]); rows stored at another "
            "stride overlap each other (a race where two tasks store to one place), leave gaps, or fall past y")


def _stored_at(got: np.ndarray, want: np.ndarray, stride: int) -> str | None:
    """"seen" when each y[n, m] whose place n * stride + m is in y and no other (n, m) shares holds want[n, m],
    four at least and a row after the first among them; "past" when row 0 is right and every later row's place
    is past y's end; else None."""
    n_rows, m = want.shape
    place = (np.arange(n_rows)[:, None] * stride + np.arange(m)).reshape(-1)
    inside = place < got.size
    shared = np.bincount(place[inside], minlength=got.size) > 1
    alone = inside.copy()
    alone[inside] = ~shared[place[inside]]
    flat = want.reshape(-1)[alone]
    if not np.all(np.abs(got[place[alone]] - flat) <= KERNEL.allowed(flat)):
        return None
    if alone.sum() >= 4 and alone.reshape(n_rows, m)[1:].any():
        return "seen"
    return "past" if alone.reshape(n_rows, m)[0].all() and not inside.reshape(n_rows, m)[1:].any() else None
