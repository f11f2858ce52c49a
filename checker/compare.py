"""Numbers against references, and the diagnosis of what went wrong.

`compare` takes what the learner's code returned, what Hugging Face computed,
and the outputs of known mistakes, each computed from the same reference
inputs. It names a mistake only when the learner's output really equals that
mistake's output (within the same tolerance as the pass test); otherwise it
says where the output diverges: which axis entries (heads, positions,
sequences), by how much, and whether there are NaN or inf values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

ATOL = 1e-4  # float32 against float32; observed differences are ~1e-6


@dataclass(frozen=True)
class Mistake:
    """A known wrong implementation of one part of a step."""

    id: str  # short name, used by tests and `--hint`
    says: str  # what the learner's code did, in one sentence
    hint: str  # a nudge that does not give the solution away
    # The part's output with this mistake, from the reference inputs; None for
    # a mistake the check recognises another way (a config value, a loading rule).
    compute: Callable[..., np.ndarray] | None = None


@dataclass
class Verdict:
    ok: bool
    summary: str  # one line: max |diff| against the tolerance, or the shape problem
    details: list[str] = field(default_factory=list)
    mistake: Mistake | None = None  # the named mistake, when one matches


def _ranges(indices) -> str:
    """[0, 1, 2, 5, 7, 8] -> '0-2, 5, 7-8'"""
    out, run = [], []
    for i in sorted(int(i) for i in indices):
        if run and i == run[-1] + 1:
            run.append(i)
        else:
            if run:
                out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else f"{run[0]}")
            run = [i]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else f"{run[0]}")
    return ", ".join(out)


def where_differs(bad: np.ndarray, axes: tuple[str, ...]) -> str:
    """Names the entries of each named axis where any element is wrong.

    `bad` is a boolean array; `axes` names its axes ("" for one not worth
    naming, like the channel axis).
    Example: 'sequences 0-1 (all of 2); heads 3, 7 (of 12); positions 1-9 (of 10)'.
    """
    parts = []
    for axis, name in enumerate(axes):
        if not name:
            continue
        other = tuple(a for a in range(bad.ndim) if a != axis)
        hit = np.flatnonzero(bad.any(axis=other))
        size = bad.shape[axis]
        parts.append(f"{name} {_ranges(hit)} ({'all ' if len(hit) == size else ''}of {size})")
    return "; ".join(parts)


def _close(a: np.ndarray, b: np.ndarray, tol: float) -> bool:
    """Equal within `tol`, with NaN and inf in the same places (of either kind)."""
    if a.shape != b.shape:
        return False
    finite = np.isfinite(a)
    if not np.array_equal(finite, np.isfinite(b)):
        return False
    return bool(np.all(np.abs(a[finite] - b[finite]) <= tol))


def compare(
    got: np.ndarray,
    want: np.ndarray,
    *,
    axes: tuple[str, ...],
    mistakes: list[tuple[Mistake, np.ndarray]],
    tol: float = ATOL,
) -> Verdict:
    """Compares `got` with `want` and diagnoses a failure.

    `mistakes` pairs each known mistake with its output on the same inputs.
    """
    got = np.asarray(got)
    if got.shape != want.shape:
        for m, out in mistakes:
            if _close(got, out, tol):
                return Verdict(False, f"shape {list(got.shape)}, expected {list(want.shape)}", [], m)
        for m, out in mistakes:
            if out.shape == got.shape:
                return Verdict(
                    False,
                    f"shape {list(got.shape)}, expected {list(want.shape)}",
                    [f"that shape is what you get when {m.says}"],
                    m,
                )
        return Verdict(False, f"shape {list(got.shape)}, expected {list(want.shape)} ({' x '.join(a or 'C' for a in axes)})")

    finite = np.isfinite(got) & np.isfinite(want)
    # NaN and inf count as right only where the reference has the same (a mask's -inf, say).
    same_special = (got == want) | (np.isnan(got) & np.isnan(want))
    with np.errstate(invalid="ignore"):  # inf - inf where both are special
        diff = np.where(finite, np.abs(got.astype(np.float64) - want), 0.0)
    bad = np.where(finite, diff > tol, ~same_special)
    max_diff = float(diff.max()) if diff.size else 0.0
    if not bad.any():
        return Verdict(True, "exact" if tol == 0 else f"max|diff| {max_diff:.1e} <= tol {tol:.0e}")
    nonfinite = ~np.isfinite(got) & ~same_special

    details = []
    if nonfinite.any():
        details.append(
            f"{int(nonfinite.sum())} of {got.size} values are NaN or inf, at {where_differs(nonfinite, axes)}"
        )
    details.append(f"differs at {where_differs(bad, axes)}")
    scale = float(np.abs(np.where(np.isfinite(want), want, 0)).max())
    summary = (
        f"max|diff| {max_diff:.1e} > tol {tol:.0e} (reference values up to {scale:.2g})"
        if (diff > tol).any()
        else f"{int(bad.sum())} values differ in being NaN or inf (yours or the reference's)"
    )
    for m, out in mistakes:
        if _close(got, out, tol):
            return Verdict(False, summary, details, m)
    return Verdict(False, summary, details)
