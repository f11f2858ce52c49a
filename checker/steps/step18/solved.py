"""What a learner's product multiplied, solved from what it computed: where no rule reads its off outputs,
the mistake may sit in what the kernel made of x (its quantisation, a block, a column), or in the scale it
gave each block of q and the bias it added, and each is read from the outputs themselves.

    solved_x(inputs, results, failing)   a line saying which elements of x the kernel multiplied otherwise
                                         than x (or its Q8_0 rounding, or its bfloat16 one), by what factor,
                                         and what they share; which elements were multiplied by |w|, their
                                         sign not w's; or, where no x gives its outputs with these weights and
                                         this bias, the scales and bias it applied (solved_scales); or None
    solved_scales(inputs, results, failing)   which of its row's scales each block of q was multiplied by,
                                         and what multiple of b each output got; or None

A product y [M, N] = x' @ w.T + b with w [N, K] of full rank K (N >= K: c_attn, c_fc) gives x' back:
x'.T = lstsq(w, (y - b).T), to float32's noise times w's condition number (about 4 for these weights).
With x known (as the kernel rounds it), y[m, n] = sum over blocks j of d[m, n, j] x (the scale applied to
block j of row n) + (the bias of output n), d the block's integer-weight dot product: the scale applied is
taken as sum_i a[j, i] scales[n, i], one matrix a [KB, KB] for every row (the identity when right), solved
with the biases on as many outputs as there are unknowns (M >= 2: each output's bias from its column).
"""

from __future__ import annotations

import numpy as np

from checker.reporting.compare import ranges
from checker.steps.step18.reference import bfloat16, int8_blocks
from runtime.quantize import BLOCK, dequantize

# x as a kernel may round it before multiplying (ROUNDINGS' ways for x), and how far an element of the solved
# x may be from it and still be that: float32's noise, or one step of the rounding (a rounding of its own).
ROUNDED = (("x", lambda x: x, lambda x: 1e-4 * _block_max(x)),
           ("x's Q8_0 rounding", int8_blocks, lambda x: 1.01 * _block_max(x) / 127),
           ("x's bfloat16 rounding", bfloat16, lambda x: np.abs(x) / 128 + 1e-6 * _block_max(x)))


def _block_max(x: np.ndarray) -> np.ndarray:
    """[M, K]: each element's block's max |x| (blocks of 32 columns)."""
    M, K = x.shape
    pad = -K % BLOCK
    blocks = np.abs(np.pad(x, ((0, 0), (0, pad)))).reshape(M, -1, BLOCK).max(axis=2)
    return np.repeat(blocks, BLOCK, axis=1)[:, :K]


def solved_x(inputs: dict, results: dict, failing: list[str]) -> str | None:
    """On the first failing product whose w can be solved through (N >= K), what its x was (see the module)."""
    name = next((n for n in failing if inputs[n][1].shape[0] >= inputs[n][1].shape[1]
                 and inputs[n][1].shape[0] <= 4096), None)
    if name is None:
        return solved_scales(inputs, results, failing)
    x, q, scales, b = inputs[name]
    y = results[name][0].astype(np.float64)
    if not np.isfinite(y).all():
        return None
    w = dequantize(q, scales).astype(np.float64)
    solved = _least_squares(w, (y - b).T).T  # [M, K]
    residual = np.abs(solved @ w.T + b - y).max() / max(np.abs(y).max(), 1e-30)
    x = x.astype(np.float64)
    if residual > 1e-3:
        return _signless(name, x, w, y, b) or solved_scales(inputs, results, failing) or (
            f"no x gives your outputs with these weights and this bias (solved on {name}: {residual:.1%} of the "
            "outputs left over), not even one whose elements keep their sign against w's: the mistake is not in "
            "what x is, but in the weights (q, their scales), the bias, or where each output goes")
    c = float((solved * x).sum() / (x * x).sum())
    if abs(c - 1) > 1e-2 and (np.abs(solved - c * x) <= abs(c) * ROUNDED[1][2](x)).all():
        return (f"the x your kernel multiplied, solved from its outputs on {name}: x times {c:.4g}, every element "
                "(to a rounding): a factor on x (its block's scale: max|x| / 127 multiplies back what x / scale "
                "divided)")
    said, off = min(((said, np.abs(solved - rounded(x)) > allowed(x)) for said, rounded, allowed in ROUNDED),
                    key=lambda found: int(found[1].sum()))
    if not off.any():
        return solved_scales(inputs, results, failing)  # the x multiplied is x (or a rounding of it)
    return (f"the x your kernel multiplied, solved from its outputs on {name}: {said} but at {int(off.sum())} of its "
            f"{off.size} elements ({_where(off, x)}){_factor(solved[off], x[off])}: what your kernel makes of those "
            "elements of x (their block's scale, their rounding to int8 and its range -128 .. 127, where they are "
            "read from)")


def _least_squares(a: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The z [K, R] closest to a z = y, a [N, K] of full rank K (N >= K), y [N, R]: through the normal equations, a
    [K, K] solve where lstsq takes a's SVD (a second each on GPT-2's c_attn and c_fc, a tenth this way). These
    weights' condition numbers (at most about 2e3, [w, |w|]'s 170) squared leave float64 more digits than the
    residual checks read; lstsq where the Gram matrix is singular."""
    try:
        return np.linalg.solve(a.T @ a, a.T @ y)
    except np.linalg.LinAlgError:
        return np.linalg.lstsq(a, y, rcond=None)[0]


def _signless(name: str, x: np.ndarray, w: np.ndarray, y: np.ndarray, b: np.ndarray) -> str | None:
    """Elements of x whose product does not follow w's sign: y - b = x' @ w.T + z @ |w|.T, solved where the
    weights allow (N >= 2K); a line when that leaves nothing over and z is more than a Q8_0 step somewhere.
    (AVX2's int8 product gives x the sign of w and multiplies by |w|: an x of -128 in int8 stays -128 when
    negated, so it multiplies |w|, whatever w's sign.)"""
    N, K = w.shape
    if N < 2 * K:
        return None
    both = np.hstack([w, np.abs(w)])  # [N, 2K]
    solved = _least_squares(both, (y - b).T).T  # [M, 2K]
    if np.abs(solved @ both.T + b - y).max() > 1e-3 * max(np.abs(y).max(), 1e-30):
        return None
    z = solved[:, K:]
    kept = np.abs(z) > ROUNDED[1][2](x)
    if not kept.any():
        return None
    c = _ratio(z[kept], x[kept])
    each = f" (|w| times {c:.3g} times the element's value)" if c is not None else ""
    return (f"the x your kernel multiplied, solved from its outputs on {name}: at {int(kept.sum())} of its "
            f"{kept.size} elements ({_where(kept, x)}) the product does not follow w's sign{each}: what your kernel "
            "makes of those elements of x (their rounding to int8 and its range -128 .. 127: where x takes w's sign, "
            "as AVX2's products do, -(-128) is -128 in int8)")


def _where(off: np.ndarray, x: np.ndarray) -> str:
    """What the off elements of x [M, K] share: their size in their block, their sign, rows, columns."""
    M, K = x.shape
    said = []
    share = np.abs(x) / np.maximum(_block_max(x), 1e-30)  # |x| / its block's max |x|
    least = share[off].min()
    large = share >= least
    if least > 0.9 and (~off & ~large).any():
        said.append("each its block's largest |x|" if least == 1 else
                    f"each within {1 - least:.1%} of its block's largest |x|")
    kind = large if least > 0.9 else np.ones_like(off)  # the elements the off ones are among
    for sign, word, other in ((x > 0, "positive", "negative"), (x < 0, "negative", "positive")):
        if not off[~sign].any() and (kind & ~sign & ~off).any():
            said.append(f"every one {word}, the {other} ones right")
    rows, columns = np.flatnonzero(off.any(axis=1)), np.flatnonzero(off.any(axis=0))
    if len(rows) < M:
        said.append(f"in rows {ranges(rows)} of x (of {M})")
    places = np.unique(columns % BLOCK)
    every = np.isin(np.arange(K) % BLOCK, places)  # those places of every block
    if len(places) < BLOCK and off[rows][:, every].all():
        said.append(f"at place{'s' * (len(places) > 1)} {ranges(places)} of every block of {BLOCK}")
    elif len(rows) > 1 and off[rows][:, columns].all() and len(columns) < K:
        said.append(f"columns {ranges(columns)} (of {K})")
    elif len(places) < BLOCK and off.sum() >= 2 * len(places):  # a place shared by several: a pattern
        said.append(f"only at places {ranges(places)} of a block of {BLOCK}")
    elif len(blocks := np.unique(columns // BLOCK)) < -(-K // BLOCK):  # whole blocks, bar elements too small to tell
        inside = np.isin(np.arange(K) // BLOCK, blocks)
        if off[rows][:, inside].mean() >= 0.9:
            said.append(f"in blocks {ranges(blocks)} of x's {-(-K // BLOCK)} (columns {blocks[0] * BLOCK} .. "
                        f"{min(K, (blocks[-1] + 1) * BLOCK) - 1}), every other block right")
    return "; ".join(said) or "no pattern in their size, sign, rows, columns or places in a block"


def _factor(solved: np.ndarray, x: np.ndarray) -> str:
    """', each read as c times its value' when one c fits every off element (1%); ', each read as 0'."""
    if np.allclose(solved, 0, atol=1e-6 * max(np.abs(x).max(), 1e-30)):
        return ", each read as 0"
    c = _ratio(solved, x)
    if c is None:
        return ""
    counted = (f": each counted {int(round(c))} times in the sum (a loop over them run again?)"
               if abs(c - round(c)) < 1e-2 and round(c) >= 2 else "")
    return f", each read as {c:.3g} times its value{counted}"


def _ratio(a: np.ndarray, x: np.ndarray) -> float | None:
    """The one c with a = c x on every element (least squares; each within 1% of the largest |c x|), or None."""
    if not (x * x).sum():
        return None
    c = float((a * x).sum() / (x * x).sum())
    return c if np.abs(a - c * x).max() <= 1e-2 * max(np.abs(c * x).max(), 1e-30) else None


MOST_BLOCKS = 32  # a [KB, KB] matrix of unknowns: K up to 1024 (GPT-2's 768, not the MLP's 3072)
SAMPLED = 8_000  # outputs the matrix is solved on (checked on them all)


def solved_scales(inputs: dict, results: dict, failing: list[str]) -> str | None:
    """On the first failing product with more outputs than unknowns: which scale each block of q was multiplied
    by, and what each output's bias was, as a line; None when no such a (see the module) gives the outputs or
    the scales and the bias solved are the right ones."""
    for name in failing:
        x, q, scales, b = inputs[name]
        M, (N, KB) = len(x), scales.shape
        y = results[name][0].astype(np.float64)
        if KB > MOST_BLOCKS or N > 4096 or M * N < 3 * (KB * KB + (N if M > 1 else 1)) or not np.isfinite(y).all():
            continue
        fits = [(fit, said) for said, rounded, _ in ROUNDED if (fit := _scales_fit(rounded(x), q, scales, b, y))]
        if not fits:
            return None
        (a, bias), said = fits[0]
        return _scales_said(name, said, a, bias, b)
    return None


def _scales_fit(x: np.ndarray, q: np.ndarray, scales: np.ndarray, b: np.ndarray, y: np.ndarray):
    """(a [KB, KB], each output's bias [N]) with y = sum_j d[:, :, j] (scales @ a.T)[:, j] + bias to float32's
    noise, x [M, K] as the kernel multiplies it; None when no a does."""
    (M, K), (N, KB) = x.shape, scales.shape
    pad = KB * BLOCK - K
    xb = np.pad(x.astype(np.float64), ((0, 0), (0, pad))).reshape(M, KB, BLOCK)
    qb = np.pad(q.astype(np.float64), ((0, 0), (0, pad))).reshape(N, KB, BLOCK)
    d = np.einsum("mjk,njk->mnj", xb, qb)  # [M, N, KB]: each block's dot product, before its scale
    pick = np.random.default_rng(0).permutation(M * N)[:SAMPLED]
    m, n = np.divmod(pick, N)
    if M > 1:  # each output's bias unknown: taken out by centring each column over the rows of x
        rows, goal = d[m, n] - d.mean(axis=0)[n], y[m, n] - y.mean(axis=0)[n]
    else:
        rows, goal = d[m, n], y[m, n]
    design = (rows[:, :, None] * scales[n][:, None, :]).reshape(len(pick), KB * KB)  # block j's d x scale i
    if M == 1:
        design = np.hstack([design, b[n][:, None]])  # one factor on b
    solution = np.linalg.lstsq(design, goal, rcond=None)[0]
    a = solution[:KB * KB].reshape(KB, KB)
    made = np.einsum("mnj,nj->mn", d, scales.astype(np.float64) @ a.T)  # y less the bias
    bias = (y - made).mean(axis=0) if M > 1 else solution[-1] * b
    if np.abs(made + bias - y).max() > 1e-4 * max(np.abs(y).max(), 1e-30):
        return None
    return a, bias


def _scales_said(name: str, rounding: str, a: np.ndarray, bias: np.ndarray, b: np.ndarray) -> str | None:
    """The line for a fit: the blocks whose scale is another's or a multiple of their own, the outputs whose
    bias is a multiple of b; None when both are right."""
    KB, found = len(a), []
    took = np.abs(a).argmax(axis=1)  # the scale each block took, where it took one
    c = a[np.arange(KB), took]
    one = np.abs(a - np.where(np.arange(KB)[None, :] == took[:, None], c[:, None], 0)).max() <= 1e-3 * np.abs(c).max()
    if not one:
        found.append("each block's scale a mix of its row's scales (no one scale per block)")
    else:
        moved = np.flatnonzero(took != np.arange(KB))
        if len(moved):
            pairs = ", ".join(f"{j}: {i}" for j, i in zip(moved[:8], took[moved[:8]]))
            found.append(f"blocks {ranges(moved)} of {KB} multiplied by another block's scale of their row "
                         f"(block: the scale it took, scales[n, i]: {pairs}{', ...' if len(moved) > 8 else ''})")
        if not np.allclose(c, 1, atol=1e-3):
            k = _ratio(c, np.ones_like(c))
            found.append(f"every block's scale times {k:.4g}" if k is not None else
                         f"the blocks' scales times {ranges(np.flatnonzero(~np.isclose(c, 1, atol=1e-3)))}-th "
                         "factors of their own")
    multiples = _multiples(bias, b)
    if multiples is None:
        found.append("each output's bias no multiple of its own b[n]")
    elif not (multiples == 1).all():
        words = {0.0: "no bias", 1.0: "b[n] once", 2.0: "b[n] twice"}
        found.append("; ".join(f"{words.get(v, f'{v:.4g} x b[n]')} on outputs {ranges(np.flatnonzero(multiples == v))}"
                               for v in dict.fromkeys(multiples.tolist())) + f" (of {len(b)} a row)")
    if not found:
        return None
    return (f"the scales and the bias your kernel applied, solved from its outputs on {name} (x as {rounding}): "
            f"{'; '.join(found)}: where your kernel reads a block's scale (scales[n, k / 32]) and adds b[n], once "
            "to each output")


def _multiples(bias: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """[N]: the multiple of b[n] each output's bias is, among the few multiples the outputs whose b is not small
    show (to 0.1%), each output's the one its bias equals to float32's noise; None when some bias is none of them."""
    large = np.abs(b) >= np.median(np.abs(b))
    values = np.unique(np.round(bias[large] / b[large], 3))
    if len(values) > 3:
        return None
    near = np.abs(bias[:, None] - values[None, :] * b[:, None])  # [N, values]
    if (near.min(axis=1) > 1e-4 * max(np.abs(b).max(), 1e-30) + 1e-3 * np.abs(bias)).any():
        return None
    return values[near.argmin(axis=1)]
