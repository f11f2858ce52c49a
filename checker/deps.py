"""The learner's earlier steps that a step file uses, and their verdicts.

A step like 09 builds on the learner's own steps 03, 04, 07 and 08. When its
output is wrong, the most useful thing to say first is which of those fails
its own check. The dependencies are read from what the checked module
actually imported (`steps.step_NN` or `solutions.solution_NN`), followed
transitively, so a learner who wrote a step differently is judged on what
their code uses.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import ModuleType

from checker.registry import CHECKS
from checker.report import FAIL, PASS, Part

_STEP = re.compile(r"^(?:steps\.step|solutions\.solution)_(\d\d)$")


def used_modules(module: ModuleType) -> dict[str, ModuleType]:
    """{'03': module, ...}: the course steps `module` uses, directly or through each other."""
    found: dict[str, ModuleType] = {}
    todo = [module]
    while todo:
        mod = todo.pop()
        for value in vars(mod).values():
            name = getattr(value, "__module__", None) or (value.__name__ if isinstance(value, ModuleType) else None)
            m = _STEP.match(name or "")
            if m and m.group(1) not in found and name in sys.modules:
                found[m.group(1)] = sys.modules[name]
                todo.append(sys.modules[name])
    return dict(sorted(found.items()))


def used_steps(module: ModuleType) -> dict[str, Path]:
    """{'03': path, ...}: the files of the course steps `module` uses."""
    return {step: Path(mod.__file__) for step, mod in used_modules(module).items()}


_found: dict[str, dict] | None = None  # while earlier steps are checked: their verdicts so far, by step


def _verdict(step: str, path: Path, checkpoint, timeout: float) -> dict:
    """The step's verdict, from the cache while none of the files it depends on changed (checker.verdicts)."""
    from checker import verdicts

    return verdicts.verdict(step, path, checkpoint, timeout=timeout)


def earlier_steps_part(module: ModuleType, checkpoint, *, timeout: float) -> Part:
    """One part: PASS if every used step with a check passes it; else which to fix first.

    The steps are checked in order, so when step 10's check runs inside step 13's, the verdicts of the
    steps 10 uses are already known: each earlier step is checked once, and judged as when checked alone.
    """
    global _found
    outermost = _found is None
    if outermost:
        _found = {}
    verdicts = {}
    try:
        for step, path in used_steps(module).items():
            if step in CHECKS:
                if step not in _found:
                    _found[step] = _verdict(step, path, checkpoint, timeout)
                verdicts[step] = _found[step]
    finally:
        if outermost:
            _found = None
    if not verdicts:
        return Part("earlier steps", PASS, "uses none of the course's earlier steps")

    def status(v: dict) -> str:
        return "ok" if v["ok"] else "stopped at the time limit" if v.get("cut_short") else "FAILS"

    failing = [s for s, v in verdicts.items() if not v["ok"]]
    listing = ", ".join(f"{s} {status(v)}" for s, v in verdicts.items())
    if not failing:
        return Part("earlier steps", PASS, f"the steps this one uses pass their checks: {listing}")
    first = failing[0]
    if verdicts[first].get("cut_short"):
        fix = (f"step {first}'s check ran past the time limit of {timeout:g} s (--timeout): raise the limit, "
               f"or check it alone: pixi run s{first}")
    else:
        fix = f"fix step {first} first: pixi run s{first} (or python -m checker {first})"
    return Part("earlier steps", FAIL, listing, [fix])
