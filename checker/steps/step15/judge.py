"""The learner's kernel judged on its outputs: each case against expected(x, w, b), a race seen by runs that
differ, a catalogued mistake named when every case equals what it computes, and otherwise which dimension
the failing cases share (a tail of K, rows of x, M past a task's band). Steps 15 and 16 share it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from checker.harness.runner import StepRun
from checker.reporting.compare import Mistake, compare
from checker.reporting.report import FAIL, PASS, Part
from checker.running.mojo import REPEATS, run_probe
from checker.steps.step15.mistakes import BIAS_HINT, MISTAKES, RACE
from checker.steps.step15.reference import KERNEL, WIDTHS, expected, shape_name
from runtime.learner import LearnerError


def _bias_times(results: dict, arrays: dict) -> Mistake | None:
    """The bias added c times (one integer c, not 1) on every case with a bias, and the cases without one
    right: named with its count. c = 0 and 2 are in MISTAKES; this names any other (a SIMD accumulator
    started at b adds it once per lane)."""
    times = set()
    for name, (x, w, b) in arrays.items():
        y, want = results[name][0].astype(np.float64), expected(x, w, None)
        if b is not None:
            times.add(c := round(float(np.sum((y - want) * b) / (len(y) * np.sum(b.astype(np.float64) ** 2)))))
            want = want + c * b
        if len(times) > 1 or not compare(y, want, axes=("row", "output"), mistakes=[], tol=KERNEL).ok:
            return None
    if len(times) != 1 or 1 in times:
        return None
    return Mistake("bias-times", f"the bias is added {times.pop()} times to each output, not once",
                   BIAS_HINT + " A SIMD accumulator that starts at b[m] adds it once per lane.")


def named_mistake(results: dict, arrays: dict) -> Mistake | None:
    """The mistake whose outputs the learner's equal on every case, if one does (`arrays`: each case's
    (x, w, b))."""
    for mistake, computes in MISTAKES:
        for compute in computes:
            if all(compare(results[name][0].astype(np.float64), compute(*args), axes=("row", "output"), mistakes=[],
                           tol=KERNEL).ok for name, args in arrays.items()):
                return mistake
    return _bias_times(results, arrays)


@dataclass(frozen=True)
class Tail:
    """What a tail of K is in a kernel: the widths whose multiples it is not, and the columns it holds."""

    widths: tuple[int, ...]
    unit: str  # "your vector width"
    columns: str  # "the columns after the last whole vector of each row"


VECTOR_TAIL = Tail(WIDTHS, "your vector width", "the columns after the last whole vector of each row")


def dimension(cases, results: dict, arrays: dict, tail: Tail = VECTOR_TAIL) -> list[str]:
    """Which dimension makes the failing cases fail, read from the pattern across all the cases and, within
    each, from which outputs are off: a tail of K (off exactly where K is no multiple of one of tail.widths),
    the last outputs of M (those after whole bands of rows), every output of M but the first (where a row of
    w starts), rows of x after the first, or every shape with more than one row of x (an index by n). []
    when no single dimension explains it."""
    bad = {}
    for name, n, k, m, _ in cases:
        x, w, b = arrays[name]
        y = results[name][0].astype(np.float64)
        want = expected(x, w, b)
        if y.shape != want.shape:
            return []
        bad[name] = np.abs(y - want) > KERNEL.allowed(want)
    failing = {name for name, cells in bad.items() if cells.any()}
    if not failing:
        return []
    shapes = {name: (n, k, m) for name, n, k, m, _ in cases}
    fits = [width for width in tail.widths if failing == {name for name, (_, k, _) in shapes.items() if k % width}]
    if fits:  # the tail of K: failing exactly where K is no multiple of a vector width
        ks = ", ".join(map(str, sorted({shapes[name][1] for name in failing})))
        right = ", ".join(map(str, sorted({k for name, (_, k, _) in shapes.items() if name not in failing})))
        width = f"{fits[0]}" if len(fits) == 1 else f"{tail.unit} ({' or '.join(map(str, fits))} fit)"
        return [f"the tail of K: off on every shape whose K is no multiple of {width} (K = {ks}), right on every "
                f"K that is (K = {right}): {tail.columns}"]
    tails = {}
    for name in failing:  # the last outputs of M: every bad output at the end of its row of y
        n, k, m = shapes[name]
        columns = np.flatnonzero(bad[name].any(axis=0))
        if len(columns) and np.array_equal(columns, np.arange(columns[0], m)):
            tails[name] = m - columns[0]
    if len(tails) == len(failing) and any(t < shapes[name][2] for name, t in tails.items()):
        listed = "; ".join(f"the last {t} of M = {shapes[name][2]}" for name, t in sorted(tails.items()))
        return [f"the last outputs of M: on each failing shape only its last outputs are off ({listed}): the rows "
                "of w after the last whole band a task takes"]
    listed = ", ".join(shape_name(*shapes[name]) for name in sorted(failing))
    if all(shapes[name][2] > 1 and not bad[name][:, 0].any() and bad[name][:, 1:].mean() > 0.9 for name in failing):
        return [f"outputs after the first: on every failing shape ({listed}) output 0 of each row of y is right and "
                "nearly every other off: where row m of w starts in memory (its weights at m * K; step 16's "
                "scales at m * KB)"]
    if all(shapes[name][0] > 1 and not bad[name][0].any() for name in failing):
        return [f"rows of x after the first: off only on shapes with more than one row of x ({listed}), and "
                "there only on rows 1 and up; row 0 is right"]
    if failing == {name for name, (n, _, _) in shapes.items() if n > 1}:
        return [f"rows of x: off on every shape with more than one row of x ({listed}), right on every shape with "
                "one: how the row n enters an index (x's row n starts at n * K, y's at n * M)"]
    return []


def kernel_part(run: StepRun, path: Path, cases, judge, *, function: str = "matvec",
                source: str = "matvec.mojo") -> Part:
    """The learner's `function` (their Mojo kernel, `source`) on `cases` in a child process; `judge(results)`
    makes the part of what it computed."""
    print(f"(building your Mojo kernel and running it in a separate process: about a minute after a change to "
          f"{source} on 2 cores, seconds when unchanged)", file=sys.stderr, flush=True)
    try:
        results = run_probe(path, cases, timeout=max(run.timeout, 300), function=function)
    except LearnerError as e:
        return run.add(Part.from_error("kernel", e))
    return judge(results)


OUTSIDE = "an index one row or one vector too far, as a loop that runs once more than it should"


def judge_kernel(run: StepRun, cases, results: dict, arrays: dict, named, *, tail: Tail = VECTOR_TAIL,
                 outside: str = OUTSIDE) -> Part:
    """The kernel part of `results` {name: [R, N, M]}: each case's outputs against expected(x, w, b) from
    `arrays` {name: (x, w, b)} (w: the weights the kernel multiplies by); `named(results, arrays)` names a
    mistake the outputs equal, or None. `tail` and `outside` word a failing tail of K and a read outside a
    tensor for this kernel."""
    raced = [name for name, *_ in cases  # NaN, as NaN, is no difference between runs
             if not all(np.array_equal(r, results[name][0], equal_nan=True) for r in results[name][1:])]
    verdicts = {name: compare(results[name][0].astype(np.float64), expected(*args), axes=("row", "output"),
                              mistakes=[], tol=KERNEL)
                for name, args in arrays.items()}
    failing = [name for name, v in verdicts.items() if not v.ok]
    margin = max((v.margin or 0.0) for v in verdicts.values())
    shown = [*raced, *(name for name in failing if name not in raced)]
    details = [] if raced else dimension(cases, results, arrays, tail)
    nan = [name for name in failing if np.isnan(results[name][0]).any()]
    if nan:
        details.insert(0, f"NaN in the outputs on {'; '.join(nan)}, from finite inputs: your kernel reads outside "
                          f"a tensor (the check puts NaN right before and after each input): {outside}; or it "
                          "sums into a variable or memory never set to 0")
    details.append(f"right on: {'; '.join(name for name in verdicts if name not in shown) or 'none'}")
    for name in shown[:4]:
        varies = " (different in each run)" if name in raced else ""
        details += [f"{name}{varies}: {verdicts[name].summary}", *(f"  {d}" for d in verdicts[name].details)]
    if len(shown) > 4:
        details.append(f"and {len(shown) - 4} more: {'; '.join(shown[4:])}")
    if raced:
        return run.add(Part("kernel", FAIL, f"the same input gave different outputs in {REPEATS} runs on "
                            f"{len(raced)} of {len(cases)} shapes; off on {len(failing)}", details, RACE))
    if not failing:
        return run.add(Part("kernel", PASS, f"{len(cases)} shapes, {REPEATS} runs each, the same every run; worst "
                            f"{margin:.2f} of allowed", margin=margin))
    return run.add(Part("kernel", FAIL, f"off on {len(failing)} of {len(cases)} shapes, right on "
                        f"{len(cases) - len(failing)}", details, named(results, arrays), margin))
