"""Numbers against references, and the diagnosis of what went wrong.

`compare` takes what the learner's code returned, what Hugging Face computed,
and the outputs of known mistakes, each computed from the same reference
inputs. It names a mistake only when the learner's output really equals that
mistake's output (within the same tolerance as the pass test); otherwise it
says where the output diverges: which axis entries (heads, positions,
sequences), by how much, and whether there are NaN or inf values.

The tolerance is elementwise, as in `torch.testing.assert_close`:

    |got - want| <= atol + rtol * |want|,   atol = scale * typical |want|

float32 rounding grows with the size of the numbers an operation sums, so
atol follows the reference's typical magnitude and rtol covers the largest
elements. "Typical" is the median of the magnitudes that are not negligible
(at least 1e-6 of the largest): a few massive activations do not move it, and
a probability vector, almost all ~0, is measured by its few real entries. The
factors were set from measured noise: every solution, correct variant and
correct style, on both stand-in checkpoints, stays within a tenth of what is
allowed (the test suite prints the margins and fails above 0.1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class Tolerance:
    """|got - want| <= scale * typical|want| + rtol * |want|, elementwise."""

    scale: float  # atol as a fraction of the typical magnitude of the reference
    rtol: float = 1e-5

    @property
    def exact(self) -> bool:
        return self.scale == 0 and self.rtol == 0

    def atol(self, want: np.ndarray) -> float:
        size = np.abs(want[np.isfinite(want)])
        if not size.any():
            return 0.0
        return self.scale * float(np.median(size[size >= 1e-6 * size.max()]))

    def allowed(self, want: np.ndarray) -> np.ndarray:
        return self.atol(want) + (self.rtol * np.abs(want) if self.rtol else np.zeros(want.shape))

    def rule(self, want: np.ndarray) -> str:
        """'|diff| <= 1.8e-04 + 1e-05 x |want|' for this reference."""
        return f"|diff| <= {self.atol(want):.1e} + {self.rtol:.0e} x |want|"

    def __str__(self) -> str:
        if self.exact:
            return "exact values"
        return f"tolerance |got - want| <= {self.scale:.0e} x typical|want| + {self.rtol:.0e} x |want|"


# One block or less of float32 work (steps 03-09); a whole model (steps 10, 11), whose
# rtol also covers what softmax makes of the logits' noise (a mistake that returns
# probabilities is named by comparing them). Measured worst margins (max |diff| /
# allowed) on both stand-ins: 0.08 and 0.05.
ONE_LAYER = Tolerance(2e-4)
WHOLE_MODEL = Tolerance(2e-3, 1e-4)
# A whole model run position by position over a KV cache (step 13, compiled): each decode step's
# products are matrix-vector kernels, not the prompt's matrix-matrix ones, so float32 sums run in
# another order at every step; on the GPT-2-scale stand-in a right cache reaches 0.098 of
# WHOLE_MODEL over 16 steps. Twice WHOLE_MODEL keeps it under a tenth.
DECODE = Tolerance(4e-3, 2e-4)
EXACT = Tolerance(0.0, 0.0)
# A float16 cache against the keys and values Hugging Face computes at the same layer (a whole model's depth
# of float32 sums before them, as DECODE allows), rounded: off by at most half a float16 step (2^-11
# relative), or where the learner's float32 key and torch's differ in their last bits next to a rounding
# boundary, the neighbouring value (one step, 2^-10): under 1.5e-3 relative, a tenth of this rtol.
FLOAT16_CACHE = Tolerance(4e-3, 1.5e-2)
# Correct code stays within this share of what a tolerance allows (the margin rule: the test suite holds
# every solution, variant and style to it); a result nearer the edge is off, if less than a mistake.
CORRECT_MARGIN = 0.1


@dataclass(frozen=True)
class Edit:
    """How to make a mistake in a copy of the step's solution: `old` (a text that occurs once) replaced by
    `new`, or each of several olds by its new, in turn. `file` is the solution's file by default, else a file
    of the solution's kernel folder ("matvec.mojo": in solutions/solution_NN_kernel/)."""

    old: str | tuple[str, ...]
    new: str | tuple[str, ...]
    file: str = ""


@dataclass(frozen=True)
class Mistake:
    """A known wrong implementation of one part of a step."""

    id: str  # short name, used by tests and `--hint`
    says: str  # what the learner's code did, in one sentence
    hint: str  # a nudge that does not give the solution away
    # The part's output with this mistake, from the reference inputs; None for
    # a mistake the check recognises another way (a config value, a loading rule).
    compute: Callable[..., np.ndarray] | None = None
    edit: Edit | None = None  # the mistake made in the solution: the suite requires the check to name it


@dataclass
class Verdict:
    ok: bool
    summary: str  # one line: max |diff| against the tolerance, or the shape problem
    details: list[str] = field(default_factory=list)
    mistake: Mistake | None = None  # the named mistake, when one matches
    margin: float | None = None  # max |diff| / allowed: at most 1 passes; None when not numeric


def ranges(indices, limit: int = 12) -> str:
    """[0, 1, 2, 5, 7, 8] -> '0-2, 5, 7-8'; past `limit` runs, the first ones and how many in all:
    '25, 61, 104, ..., 1201 entries in all' (a wide axis, like the vocabulary's, stays one line)."""
    indices = sorted(int(i) for i in indices)
    out, run = [], []
    for i in indices:
        if run and i == run[-1] + 1:
            run.append(i)
        else:
            if run:
                out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else f"{run[0]}")
            run = [i]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else f"{run[0]}")
    if len(out) > limit:
        return ", ".join(out[:limit]) + f", ..., {len(indices)} entries in all"
    return ", ".join(out)


def _specials(values: np.ndarray) -> str:
    """'-inf', 'NaN', '+inf or NaN': the kinds of non-finite value among `values`."""
    kinds = [name for name, hit in (("-inf", np.isneginf(values)), ("+inf", np.isposinf(values)),
                                    ("NaN", np.isnan(values))) if hit.any()]
    return " or ".join(kinds) or "inf or NaN"


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
        parts.append(f"{name} {ranges(hit)} ({'all ' if len(hit) == size else ''}of {size})")
    return "; ".join(parts)


def _close(got: np.ndarray, want: np.ndarray, tol: Tolerance) -> bool:
    """Equal within `tol`, with NaN and inf in the same places (of either kind)."""
    if got.shape != want.shape:
        return False
    finite = np.isfinite(got)
    if not np.array_equal(finite, np.isfinite(want)):
        return False
    with np.errstate(invalid="ignore"):
        return bool(np.all(np.abs(got[finite] - want[finite]) <= tol.allowed(want)[finite]))


def compare(
    got: np.ndarray,
    want: np.ndarray,
    *,
    axes: tuple[str, ...],
    mistakes,
    tol: Tolerance = ONE_LAYER,
) -> Verdict:
    """Compares `got` with `want` and diagnoses a failure.

    `mistakes` pairs each known mistake with its output on the same inputs (any iterable: a
    generator's outputs are computed only until one matches).
    """
    got = np.asarray(got)
    if got.shape != want.shape:
        mistakes = list(mistakes)
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
        return Verdict(False, f"shape {list(got.shape)}, expected {list(want.shape)} "
                       f"({' x '.join(a or 'C' for a in axes)})")

    finite = np.isfinite(got) & np.isfinite(want)
    # NaN and inf count as right only where the reference has the same (a mask's -inf, say).
    same_special = (got == want) | (np.isnan(got) & np.isnan(want))
    with np.errstate(invalid="ignore"):  # inf - inf where both are special
        diff = np.where(finite, np.abs(got.astype(np.float64) - want), 0.0)
    allowed = tol.allowed(want)
    bad = np.where(finite, diff > allowed, ~same_special)
    max_diff = float(diff.max()) if diff.size else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(finite & (diff > 0), diff / allowed, 0.0)
    margin = float(ratio.max()) if ratio.size else 0.0
    if not bad.any():
        if tol.exact:
            return Verdict(True, "exact", margin=0.0)
        return Verdict(True, f"max|diff| {max_diff:.1e}, {margin:.2f} of allowed ({tol.rule(want)})", margin=margin)
    nonfinite = ~np.isfinite(got) & ~same_special

    details = []
    if nonfinite.any():
        details.append(
            f"{int(nonfinite.sum())} of {got.size} values are NaN or inf, at {where_differs(nonfinite, axes)}"
        )
    details.append(f"differs at {where_differs(bad, axes)}")
    scale = float(np.abs(np.where(np.isfinite(want), want, 0)).max())
    if (finite & (diff > allowed)).any():
        if tol.exact:
            summary = f"max|diff| {max_diff:.1e}, expected exact values (reference values up to {scale:.2g})"
        else:
            summary = (f"max|diff| {max_diff:.1e}, {margin:.2g}x the allowed {tol.rule(want)} "
                       f"(reference values up to {scale:.2g})")
    else:
        where_special = np.isfinite(got) & ~np.isfinite(want)
        where_finite = ~np.isfinite(got) & np.isfinite(want)
        counts = [(int(where_special.sum()), f"finite where the reference holds {_specials(want[where_special])}"),
                  (int(where_finite.sum()), f"{_specials(got[where_finite])} where the reference is finite"),
                  (int((~np.isfinite(got) & ~np.isfinite(want) & ~same_special).sum()),
                   "inf or NaN of another kind than the reference's")]
        summary = "; ".join(f"{n} of {got.size} values are {what}" for n, what in counts if n)
    named = next((m for m, out in mistakes if _close(got, out, tol)), None)
    return Verdict(False, summary, details, named, margin)


def differs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Where a and b hold other values, NaN equal to NaN (a cache's or pool's unwritten slots are NaN in both)."""
    return (a != b) & ~(np.isnan(a) & np.isnan(b))
