"""The learner's kernel judged on its outputs: each case against expected(x, w, b), a race seen by runs that
differ, a catalogued mistake named when every case equals what it computes, and otherwise which dimension
the failing cases share (a tail of K, rows of x, M past a task's band). Steps 15 and 16 share it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from checker.diagnosis.crashes import crash_part
from checker.harness.runner import StepRun
from checker.reporting.compare import Mistake, compare, ranges
from checker.reporting.report import FAIL, PASS, Part
from checker.running.mojo import REPEATS, Crashed, run_probe
from checker.steps.step15.mistakes import BIAS_MISSING, BIAS_TWICE, MISTAKES, RACE
from checker.steps.step15.reading import readings, store_stride, terms_reading
from checker.steps.step15.reference import KERNEL, WIDTHS, expected, shape_name
from runtime.learner import LearnerError

SHAPE_WORDS = {"N": "N, the rows of x (and of y)", "K": "K, the columns of x and w",
               "M": "M, the rows of w (the outputs of a row of y)"}


def named_mistake(results: dict, arrays: dict) -> Mistake | None:
    """The mistake whose outputs the learner's equal on every case, if one does (`arrays`: each case's
    (x, w, b))."""
    for mistake, computes in MISTAKES:
        for compute in computes:
            if all(compare(results[name][0].astype(np.float64), compute(*args), axes=("row", "output"), mistakes=[],
                           tol=KERNEL).ok for name, args in arrays.items()):
                return mistake
    return None


@dataclass(frozen=True)
class Tail:
    """What a tail of K is in a kernel: the widths whose multiples it is not, and the columns it holds."""

    widths: tuple[int, ...]
    unit: str  # "your vector width"
    columns: str  # "the columns after the last whole vector of each row"
    piece: str  # "vector": what a width's columns are
    whole: str  # what only shapes of a whole vector or more run


VECTOR_TAIL = Tail(WIDTHS, "your vector width", "the columns after the last whole vector of each row", "vector",
                   "the loop over a row's whole vectors (its loads of w and x, their product, the accumulator); a "
                   "shape whose K is below one vector runs the tail alone")


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
        columns = np.flatnonzero(bad[name].any(axis=0))  # nearly all off from the first to M (an output never
        if len(columns) and len(columns) >= 0.99 * (m - columns[0]):  # written may hold its right value by chance)
            tails[name] = m - columns[0]
    if len(tails) == len(failing) and any(t < shapes[name][2] - 1 for name, t in tails.items()):
        if (bands := _bands_run(failing, shapes, tails)) is not None:
            return [bands]
        listed = "; ".join(f"the last {t} of M = {shapes[name][2]}" for name, t in sorted(tails.items()))
        return [f"the last outputs of M: on each failing shape only its last outputs are off ({listed}): the rows "
                "of w after the last whole band a task takes"]
    for pieces in (1, 2) if failing != set(shapes) else ():  # right only below one whole vector, or below two
        whole = [width for width in tail.widths
                 if failing == {name for name, (_, k, _) in shapes.items() if k >= pieces * width}]
        if whole:
            ks = ", ".join(map(str, sorted({shapes[name][1] for name in failing})))
            right = ", ".join(map(str, sorted({k for name, (_, k, _) in shapes.items() if name not in failing})))
            width = f"{whole[0]}" if len(whole) == 1 else f"{tail.unit} ({' or '.join(map(str, whole))} fit)"
            said = (f"K is {width} or more" if pieces == 1 else
                    f"K holds two whole {tail.piece}s of {width} or more")
            what = tail.whole if pieces == 1 else (f"what a {tail.piece} after a row's first reads: where {tail.piece} "
                                                   f"j starts (j times its width), and the index of what it takes "
                                                   f"from j (its scale, its offset)")
            return [f"the whole {tail.piece}s of K: off on every shape whose {said} (K = {ks}), right on every "
                    f"other (K = {right}): {what}"]
    listed = ", ".join(shape_name(*shapes[name]) for name in sorted(failing))
    if (spaced := _one_in_each_run(failing, shapes, bad)) is not None:
        return [spaced]
    if (period := _periodic(failing, shapes, bad)) is not None:
        return [period]
    if all(shapes[name][2] > 1 and not bad[name][:, 0].any() and bad[name][:, 1:].mean() > 0.9 for name in failing):
        return [f"outputs after the first: on every failing shape ({listed}) output 0 of each row of y is right and "
                "nearly every other off: where row m of w starts in memory (its weights at m * K; step 16's "
                "scales at m * KB)"]
    if all(shapes[name][0] > 1 and not bad[name][0].any() for name in failing):
        return [f"rows of x after the first: off only on shapes with more than one row of x ({listed}), and "
                "there only on rows 1 and up, never on row 0"]
    if failing == {name for name, (n, _, _) in shapes.items() if n > 1}:
        return [f"rows of x: off on every shape with more than one row of x ({listed}), right on every shape with "
                "one: how the row n enters an index (x's row n starts at n * K, y's at n * M)"]
    within = [width for width in tail.widths if len(failing) > 1 and
              all(k % width for name, (_, k, _) in shapes.items() if name in failing)]
    if within:  # failing only where K is no multiple of a width, though not everywhere it is not
        w = within[0]
        ks = ", ".join(map(str, sorted({shapes[name][1] for name in failing})))
        right = sorted({k for name, (_, k, _) in shapes.items() if name not in failing})
        said = [f"every multiple of {w} (K = {', '.join(str(k) for k in right if k % w == 0)})"
                if any(k % w == 0 for k in right) else "",
                f"K = {', '.join(str(k) for k in right if k % w)}" if any(k % w for k in right) else ""]
        return [f"the tail of K: off only on shapes whose K is no multiple of {w} (K = {ks}); right on "
                f"{' and on '.join(x for x in said if x)}: {tail.columns}"]
    return []


def _bands_run(failing: set, shapes: dict, tails: dict) -> str | None:
    """When every failing shape is right on its first c bands of rows of w and off on all after them, a band
    ceil(M / t) rows rounded up to a multiple of g, the same c < t and g on each (and c such bands cover every
    shape that is right): c, t and g in words. Bands sized for t tasks and c started: the band from one count,
    the tasks from another. Of the fits, one whose c is this machine's count of cores first, then the least t."""
    cores = os.cpu_count() or 1
    right = {name: shapes[name][2] - tail for name, tail in tails.items()}  # each failing shape's right outputs
    first = next(iter(right))
    fits = []
    for t in range(2, 65):
        for g in (1, 2, 4, 8, 16):
            def band(m: int) -> int:
                return -(-(-(-m // t)) // g) * g

            c = right[first] // max(band(shapes[first][2]), 1)
            if 0 < c < t and all(right[name] == c * band(shapes[name][2]) for name in failing) and all(
                    c * band(m) >= m for name, (_, _, m) in shapes.items() if name not in failing):
                fits.append((c != cores, t, g, c))
    if not fits:
        return None
    _, t, g, c = min(fits)
    rounded = f", rounded up to a multiple of {g}," if g > 1 else ""
    listed = "; ".join(f"{shapes[name][2] - tail} of M = {shapes[name][2]}" for name, tail in sorted(tails.items()))
    ran = f"{c}, this machine's count of cores," if c == cores else f"{c}"
    return (f"bands of rows of w: on every failing shape only the first {c} band{'s' if c > 1 else ''} of ceil(M / "
            f"{t}) rows{rounded} are right ({listed}), every output after them off: bands sized for {t} tasks, and "
            f"{ran} run: the size of a band comes from one count of tasks, the tasks started from another")


def _periodic(failing: set, shapes: dict, bad: dict) -> str | None:
    """When the outputs off in row 0 of y repeat with a period p along M on the small failing shapes whose row 0
    is off (off exactly where m % p is in one set of residues, two periods at least), the smallest such p
    and residues, in words: rows of w taken in groups (a pass of a few rows, a band)."""
    # the small shapes (one band or few), where row 0 is off: later rows may add what carries over from earlier ones
    tested = [name for name in failing if 8 <= shapes[name][2] <= 128 and bad[name][0].any()]
    if not tested:
        return None
    for p in range(2, 65):
        residues = None
        long_enough = [name for name in tested if shapes[name][2] >= 2 * p]  # two periods at least
        if not long_enough:
            return None
        for name in long_enough:
            off = bad[name][0]
            m = np.arange(len(off))
            here = {int(r) for r in np.unique(m[off] % p)}
            if residues is None:
                residues = here
            if here != residues or not np.array_equal(off, np.isin(m % p, sorted(residues))):
                residues = set()
                break
        shifted = any({(r + d) % p for r in residues} == residues for d in range(1, p) if p % d == 0)
        if residues and len(residues) < p and not shifted:  # not a shorter period seen on one shape alone
            runs = ranges(sorted(residues))
            return (f"outputs off in a pattern that repeats every {p} along M, on row 0 of the small failing "
                    f"shapes: off exactly where m % {p} is {runs}, right elsewhere: w's rows are taken in groups (a "
                    "pass of rows, a band), and what goes wrong is in those groups: where a group starts, how far "
                    "the next one moves, what carries over from one to the next (an accumulator not set back to 0)")
    return None


def _one_in_each_run(failing: set, shapes: dict, bad: dict) -> str | None:
    """When on every failing shape exactly one output in each run of p (y's outputs in memory order, n * M + m;
    p its own on each shape) is off, the first of each run or the last: which, and the runs' lengths. With few
    runs (as many as cores: two on two) a shape may show one off output alone, the last of the first run (the
    last run ends at N * M, a bound of its own): then p is where it ends, a second run must follow it, and p
    must be ceil(N * M / T) for one number of runs T on every such shape (one output alone says little)."""
    found, tasks = {}, None
    for name in failing:
        flat = bad[name].reshape(-1)
        off, i = np.flatnonzero(flat), np.arange(flat.size)
        if off.size == flat.size:
            continue  # every output off: runs of one, or no runs at all
        if off.size >= 2:
            p = int(off[1] - off[0])
        elif 0 < off[0] < flat.size - 1:
            p = int(off[0]) + 1
            fit = {t for t in range(2, flat.size + 1) if -(-flat.size // t) == p}
            tasks = fit if tasks is None else tasks & fit
            if not tasks:
                return None
        else:
            return None
        which = "last" if off[0] == p - 1 else "first" if off[0] == 0 else None
        if which is None or not np.array_equal(flat, i % p == off[0]):
            return None
        found[name] = (which, p)
    if not found:
        return None
    if len({which for which, _ in found.values()}) != 1:
        return None
    which = next(iter(found.values()))[0]
    runs = "; ".join(f"every {p} on {name}" for name, (_, p) in sorted(found.items()))
    return (f"one output in each run of y's outputs (in memory order, n * M + m) is off, the {which} of each run "
            f"({runs}): the outputs are cut into runs, a task's each, and the {which} of a run is not computed: "
            "where a task's range of outputs " + ("ends (one short)" if which == "last" else "starts"))


def kernel_part(run: StepRun, path: Path, cases, judge, *, function: str = "matvec",
                source: str = "matvec.mojo") -> Part:
    """The learner's `function` (their Mojo kernel, `source`) on `cases` in a child process; `judge(cases,
    results)` makes the part of what it computed. A crash on some cases: which, what their N, K and M share,
    and the judge's part of the others."""
    print(f"(building your Mojo kernel and running it in a separate process: about a minute after a change to "
          f"{source} on 2 cores, seconds when unchanged)", file=sys.stderr, flush=True)
    try:
        results = run_probe(path, cases, timeout=max(run.timeout, 300), function=function)
    except Crashed as e:
        ran = [case for case in cases if case[0] in e.results]
        return run.add(crash_part("kernel", e, {name: dict(N=n, K=k, M=m) for name, n, k, m, _ in cases},
                                  SHAPE_WORDS, judge(ran, e.results) if ran else None, "shapes"))
    except LearnerError as e:
        return run.add(Part.from_error("kernel", e))
    return run.add(judge(cases, results))


BIAS_COUNTS = {0: BIAS_MISSING, 2: BIAS_TWICE}
OUTSIDE = "an index one row or one vector too far, as a loop that runs once more than it should"


def judge_kernel(cases, results: dict, arrays: dict, named, *, tail: Tail = VECTOR_TAIL, outside: str = OUTSIDE,
                 known: dict[int, Mistake] | None = None, packed: dict | None = None) -> Part:
    """The kernel part of `results` {name: [R, N, M]} on `cases` (those it ran): each case's outputs against
    expected(x, w, b) from `arrays` {name: (x, w, b)} (w: the weights the kernel multiplies by);
    `named(results, arrays)` names a mistake the outputs equal, or None; else they are read
    (checker.steps.step15.reading: `known` the bias counts the catalogue names, `packed` step 16's int8 cases).
    `tail` and `outside` word a failing tail of K and a read outside a tensor for this kernel."""
    arrays = {name: arrays[name] for name, *_ in cases}
    packed = None if packed is None else {name: packed[name] for name, *_ in cases}
    raced = [name for name, *_ in cases  # NaN, as NaN, is no difference between runs
             if not all(np.array_equal(r, results[name][0], equal_nan=True) for r in results[name][1:])]
    verdicts = {name: compare(results[name][0].astype(np.float64), expected(*arrays[name]), axes=("row", "output"),
                              mistakes=[], tol=KERNEL)
                for name, *_ in cases}
    failing = [name for name, v in verdicts.items() if not v.ok]
    margin = max((v.margin or 0.0) for v in verdicts.values())
    shown = [*raced, *(name for name in failing if name not in raced)]
    mistake, lines = None, []
    stride = store_stride(cases, results, arrays) if failing else None  # y's rows stored elsewhere: races too
    if stride is not None:
        lines = [stride]
    elif failing and not raced:  # what the outputs are, read from them; else which dimension fails (first run)
        mistake = named(results, arrays)
        if mistake is None:
            lines, mistake = readings(cases, results, arrays, BIAS_COUNTS if known is None else known, packed)
    nan = [name for name in failing if np.isnan(results[name][0]).any()]
    if nan:
        lines.append(f"NaN in the outputs on {'; '.join(nan)}, from finite inputs: your kernel reads outside a tensor "
                     f"(the check puts NaN right before and after each input): {outside}; or it sums into a variable "
                     "or memory never set to 0")
    details = lines + (dimension(cases, results, arrays, tail) if failing and len(lines) == len(nan[:1]) else [])
    if failing and not raced and mistake is None and stride is None:  # which terms each output summed, solved for
        details += [terms] if (terms := terms_reading(cases, results, arrays, tail.widths, tail.piece)) else []
    details.append(f"right on: {'; '.join(name for name in verdicts if name not in shown) or 'none'}")
    for name in shown[:4]:
        varies = " (different in each run)" if name in raced else ""
        details += [f"{name}{varies}: {verdicts[name].summary}", *(f"  {d}" for d in verdicts[name].details)]
    if len(shown) > 4:
        details.append(f"and {len(shown) - 4} more: {'; '.join(shown[4:])}")
    if raced:
        return Part("kernel", FAIL, f"the same input gave different outputs in {REPEATS} runs on "
                            f"{len(raced)} of {len(cases)} shapes; off on {len(failing)}", details,
                    RACE if stride is None else None)
    if not failing:
        return Part("kernel", PASS, f"{len(cases)} shapes, {REPEATS} runs each, the same every run; worst "
                    f"{margin:.2f} of allowed", margin=margin)
    return Part("kernel", FAIL, f"off on {len(failing)} of {len(cases)} shapes, right on {len(cases) - len(failing)}",
                details, mistake, margin)
