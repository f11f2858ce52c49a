"""Step 15's catalogue: kernels a learner may write instead of the right one, each with what it computes
from a case's x, w and b where it computes something (a race is seen by its runs differing; the bias added
another number of times than once, by the count checker.steps.step15.reading reads), and the edit that
makes it in the solution's Mojo."""

from __future__ import annotations

import numpy as np

from checker.reporting.compare import Edit, Mistake
from checker.steps.step15.reference import WIDTHS, expected


def _tail_dropped(width: int):
    def compute(x, w, b):
        whole = x.shape[1] // width * width
        return expected(x[:, :whole], w[:, :whole], b)
    return compute


BIAS_HINT = ("Add b[m] once per output, after the row's sum is complete: not inside a loop that runs more than "
             "once per output.")
# The bias added another number of times than once: named by the count checker.steps.step15.reading reads
BIAS_TWICE = Mistake("bias-twice", "the bias is added twice", BIAS_HINT, edit=Edit(
    "yp[unsafe_offset=n * M + m + r] = s + bp[unsafe_offset=m + r]",
    "yp[unsafe_offset=n * M + m + r] = s + bp[unsafe_offset=m + r] + bp[unsafe_offset=m + r]", file="matvec.mojo"))
BIAS_MISSING = Mistake("bias-missing", "the bias is not added", "y = x @ w.T + b: each output adds its own b[m].",
                       edit=Edit("yp[unsafe_offset=n * M + m + r] = s + bp[unsafe_offset=m + r]",
                                 "yp[unsafe_offset=n * M + m + r] = s", file="matvec.mojo"))
MISTAKES = [
    (Mistake("tail-dropped", "the last K % width columns of each row are left out: the loop after the whole "
             "vectors (the tail) is missing or never runs", "When K is not a multiple of your vector width, the "
             "columns after the last whole vector still count: a scalar loop over them, after the vector loop.",
    edit=Edit('s += wp[unsafe_offset=(m + r) * K + j] * xp[unsafe_offset=n * K + j]', 'pass', file='matvec.mojo')),
     [_tail_dropped(width) for width in WIDTHS]),
    (Mistake("x-row-stride", "every row of y is computed from x's first row: x is read at k, not at row n's "
             "start n * K + k", "x is [N, K] in one block of memory: row n starts at n * K.",
    edit=Edit(("xp.unsafe_load[width=WIDTH](n * K + k)", "xp[unsafe_offset=n * K + j]"),
              ("xp.unsafe_load[width=WIDTH](k)", "xp[unsafe_offset=j]"), file="matvec.mojo")),
     [lambda x, w, b: expected(np.repeat(x[:1], len(x), axis=0), w, b)]),
    (Mistake("w-transposed", "w is read as if it were [K, M] (w[k * M + m]), not the Linear's [M, K] "
             "(w[m * K + k])", "A Linear's weight is [out, in]: output m's K weights are row m, contiguous, "
             "starting at m * K.",
    edit=Edit(("while k + WIDTH <= K:", "wp[unsafe_offset=(m + r) * K + j]"),
              ("while k + WIDTH <= K and False:", "wp[unsafe_offset=j * M + m + r]"), file="matvec.mojo")),
     [lambda x, w, b: expected(x, w.reshape(-1).reshape(w.shape[1], w.shape[0]).T, b)]),
]
RACE = Mistake("race", "the same input gives different outputs from run to run: two tasks write (or add into) "
               "the same outputs at the same time, or some outputs are never written (y keeps whatever its memory "
               "held: a wrong index for y, or rows no task takes)", "Each task takes rows of its own, and every "
               "y[n, m], at n * M + m, is written exactly once: sum into a local variable, then store it.",
    edit=Edit(("var end = min((task + 1) * per_task, M)\n            var m = task * per_task",
               "yp[unsafe_offset=n * M + m + r] = s + bp[unsafe_offset=m + r]"),
              ("var end = M\n            var m = 0",
               "yp[unsafe_offset=n * M + m + r] += (s + bp[unsafe_offset=m + r]) / TASKS"), file="matvec.mojo"))
CATALOGUE = [m for m, _ in MISTAKES] + [BIAS_TWICE, BIAS_MISSING, RACE]
