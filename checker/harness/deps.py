"""The learner's earlier steps that a step file uses, and their verdicts.

A step like 09 builds on the learner's own steps 03, 04, 07 and 08. When its
output is wrong, the most useful thing to say first is which of those fails
its own check. The dependencies are read from what the checked module
actually imported (`steps.step_NN` or `solutions.solution_NN`, or the online
book's February 2026 `step_NN`, see runtime.compat), followed transitively, so
a learner who wrote a step differently is judged on what their code uses.
Each file is checked as the course step it is (checker.harness.layout): in the
February layout steps/step_02.py holds GPT2MLP and is checked as step 04.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from checker import registry
from checker.harness import verdicts
from checker.harness.layout import place
from checker.reporting.report import FAIL, PASS, Part
from runtime.learner import imported_steps


@dataclass(frozen=True)
class Used:
    number: str  # the file's own number: steps/step_NN.py
    step: str  # this course's step it is checked as (checker.harness.layout; the same number but in another layout)
    module: ModuleType

    @property
    def path(self) -> Path:
        return Path(self.module.__file__)

    @property
    def label(self) -> str:
        """'03', or '02 (as 04)' for a file of another layout."""
        return self.number if self.number == self.step else f"{self.number} (as {self.step})"


def uses(module: ModuleType) -> list[Used]:
    """The step files `module` uses, directly or through each other, in the order of their course steps."""
    found = imported_steps(module)
    used = [Used(number, place(Path(m.__file__), number).step, m) for number, m in found.items()]
    return sorted(used, key=lambda u: (u.step, u.number))


def used_modules(module: ModuleType) -> dict[str, ModuleType]:
    """{'03': module, ...}: the course steps `module` uses, by the course step each is checked as."""
    found: dict[str, ModuleType] = {}
    for u in uses(module):
        found.setdefault(u.step, u.module)
    return found


def used_steps(module: ModuleType) -> dict[str, Path]:
    """{'03': path, ...}: the files of the steps `module` uses, by their own numbers."""
    return {u.number: u.path for u in uses(module)}


_found: dict[tuple[str, str], dict] | None = None  # while earlier steps are checked: their verdicts, by (step, file)


def _verdict(step: str, path: Path, checkpoint, timeout: float) -> dict:
    """The file's verdict as step `step`, from the cache while none of the files it depends on changed
    (checker.harness.verdicts)."""
    return verdicts.verdict(step, path, checkpoint, timeout=timeout)


def earlier_steps_part(module: ModuleType, checkpoint, *, timeout: float) -> Part:
    """One part: PASS if every used step with a check passes it; else which to fix first.

    The steps are checked in order, so when step 10's check runs inside step 13's, the verdicts of the
    steps 10 uses are already known: each earlier step is checked once, and judged as when checked alone.
    """
    global _found
    checked = registry.steps()
    outermost = _found is None
    if outermost:
        _found = {}
    verdicts: dict[Used, dict] = {}
    try:
        for u in uses(module):
            if u.step in checked:
                key = (u.step, str(u.path))
                if key not in _found:
                    _found[key] = _verdict(u.step, u.path, checkpoint, timeout)
                verdicts[u] = _found[key]
    finally:
        if outermost:
            _found = None
    if not verdicts:
        return Part("earlier steps", PASS, "uses none of the course's earlier steps")

    def status(v: dict) -> str:
        return "ok" if v["ok"] else "stopped at the time limit" if v.get("cut_short") else "FAILS"

    failing = [u for u, v in verdicts.items() if not v["ok"]]
    listing = ", ".join(f"{u.label} {status(v)}" for u, v in verdicts.items())
    if not failing:
        return Part("earlier steps", PASS, f"the steps this one uses pass their checks: {listing}")
    first = failing[0]
    if verdicts[first].get("cut_short"):
        fix = (f"step {first.label}'s check ran past the time limit of {timeout:g} s (--timeout): raise the "
               f"limit, or check it alone: pixi run s{first.number}")
    else:
        fix = f"fix step {first.label} first: pixi run s{first.number} (or python -m checker {first.number})"
    return Part("earlier steps", FAIL, listing, [fix])
