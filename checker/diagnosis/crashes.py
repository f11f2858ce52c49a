"""A kernel that crashes on some cases and runs the others, read from which cases crash: what the crashing
cases share that the others do not (M no multiple of 8: a loop over M in steps of 8 whose last step runs past
M), and the judge's part of what it computed on the others.

    crashed_on(crashed, features, words)   what the crashing cases share, by their dimensions: exactly the
                                           cases whose K is no multiple of 16 (or 8), whose T is above 1; or,
                                           since a write just past a tensor crashes only now and then, a
                                           dimension every crashing case shares with a few that ran. None
                                           when no dimension tells them apart, or when as many cases drawn
                                           at random would be told as often (shared_by: the reading alone)
    crash_part(name, crash, features, words, ran, unit)   the part: where it crashed, what crashed_on
                                           reads, the indices to check, and the judge's part `ran` of the others

A crash kills the process, so what it read or wrote is not seen; which cases it takes is.
"""

from __future__ import annotations

import random
from itertools import combinations

import numpy as np

from checker.reporting.report import FAIL, PASS, Part

RACED = ("crashes where it crashed, and outputs that differ from run to run where it ran: together, a task that "
         "writes past where it should stop, into another task's place where there is one and past a tensor's end "
         "where there is not (a last band, run or tile not cut at its end, a task writing past its own rows)")
CHANCE, DRAWS = 0.15, 400  # a reading random crash sets get this often says nothing; how many of them are drawn
STEPS = (2, 4, 8, 16, 32, 64, 128)  # the steps a loop may take over a dimension: a vector, a band, a tile


def _listed(values) -> str:
    return ", ".join(map(str, sorted(set(values))))


def _alike(steps: list[int]) -> str:
    return ", ".join(map(str, steps[:-1])) + (" or " if len(steps) > 1 else "") + str(steps[-1])


def crashed_on(crashed: list[str], features: dict[str, dict[str, int]], words: dict[str, str]) -> str | None:
    """What the cases `crashed` share that the others do not, by the dimensions `features` gives each case
    ({name: {"M": 11, ...}}), each named in `words` ({"M": "M, the rows of w"}): exactly them, or a set that
    holds every one of them and leaves a third of the cases out at least (the others say too little). None
    when nothing tells, or when as many crashing cases drawn at random would often be told too (CHANCE of
    them or more, all such sets counted or DRAWS drawn): with few cases and many dimensions, two crashes are
    "exactly the cases whose H is above 2" by chance."""
    said = shared_by(crashed, features, words)
    if said is None:
        return None
    names, k = list(features), len(set(crashed))
    every = list(combinations(names, k))
    if len(every) > DRAWS:
        rng = random.Random(0)
        every = [rng.sample(names, k) for _ in range(DRAWS)]
    told = sum(shared_by(list(drawn), features, words) is not None for drawn in every)
    return said if told < CHANCE * len(every) else None


def shared_by(crashed: list[str], features: dict[str, dict[str, int]], words: dict[str, str]) -> str | None:
    """crashed_on's reading, before its test against chance: what the crashing cases share, or None."""
    names, down = list(features), set(crashed)
    if len(down) < 2 or down == set(names):  # one case is the most or least of something by chance
        return None
    bounds = []
    for f, said in words.items():
        values = {name: features[name][f] for name in names}

        def of(cases) -> str:
            return f"{f} = {_listed(values[name] for name in cases)}"

        ran = [name for name in names if name not in down]
        partial = {}  # the cases whose f is no multiple of d, for each d that leaves some
        for d in STEPS:
            cases = frozenset(name for name in names if values[name] % d)
            if cases and cases != set(names):
                partial.setdefault(cases, []).append(d)
        for cases, steps in partial.items():
            d = steps[0]  # the least step that leaves these cases a last one not whole; larger ones may too
            which, whole = (f"{f} is odd", f"{f} is even") if d == 2 else (f"{f} is no multiple of {d}",
                                                                         f"{f} is a multiple of {d}")
            told = " (these cases cannot tell which)" if len(steps) > 1 else ""
            loop = (f"{said}: a loop over it in steps of {_alike(steps)}{told} whose last step is not whole runs past "
                    f"its end (that step's end: the smaller of start + the step and {f})")
            if cases == down:
                return (f"it crashed exactly on the cases whose {which} ({of(down)}) and ran every case whose {whole} "
                        f"({of(ran)}): {loop}")
            if down < cases and 3 * (len(names) - len(cases)) >= len(names):
                bounds.append((len(cases), f"every case it crashed on has {which.replace(' is ', ' ', 1)} "
                                           f"({of(down)}), as some it ran do ({of(cases - down)}); it ran every case "
                                           f"whose {whole} ({of(set(names) - cases)}): {loop}"))
        for k in sorted(set(values.values()))[:-1]:
            above = {name for name in names if values[name] > k}
            below = set(names) - above
            if above == down:
                return (f"it crashed exactly on the cases whose {f} is above {k} ({of(down)}) and ran every other "
                        f"({of(ran)}): {said}: an index that grows with {f} past what its tensor holds")
            if below == down:
                return (f"it crashed exactly on the cases whose {f} is {k} or less ({of(down)}) and ran every other "
                        f"({of(ran)}): {said}: a loop over it that takes more than there are (a whole tile, band or "
                        f"group of {f}, not cut at {f})")
    return min(bounds)[1] if bounds else None


def crash_part(name: str, crash, features: dict[str, dict[str, int]], words: dict[str, str], ran: Part | None,
               unit: str = "cases") -> Part:
    """The part of a kernel that crashed (`crash`: checker.running.mojo.Crashed) on some of its `unit`: what the
    crashing ones share (crashed_on, on each case's `features` named by `words`), and `ran`, the judge's part
    of the cases it ran (None: none ran)."""
    shared = crashed_on(crash.crashed, features, words)
    count = (f"every one of the {crash.total} {unit}" if len(crash.crashed) == crash.total else
             f"{len(crash.crashed)} of the {crash.total} {unit}")
    summary = f"your kernel crashed the process that ran it ({crash.signal}) on {count}"
    others = crash.total - len(crash.crashed)
    if ran is not None:
        summary += (f"; right on the {others} it ran" if ran.status == PASS else
                    f"; on the {others} it ran, {ran.summary}")
    raced = any(not all(np.array_equal(r, runs[0], equal_nan=True) for r in runs[1:])
                for runs in crash.results.values())
    details = [f"crashed on: {'; '.join(crash.crashed)}", *([RACED] if raced else []), *([shared] if shared else []),
               f"a crash is a read or write outside a tensor: check each index against the tensor's size: "
               f"{crash.indices}"]
    if ran is not None and ran.status != PASS:
        details += ran.details
    return Part(name, FAIL, summary, details, ran.mistake if ran is not None and ran.status != PASS else None)
