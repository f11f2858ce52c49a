"""Which check checks which step: the machinery reads what each step's folder declares, and never
imports a step itself.

    steps()  -> {"01": Step, ...}     step("07") -> Step     adapters() -> [Adapter, ...]

Each folder of checker/steps/ is found on first use: `stepNN/` declares `STEP = Step(...)` (its check,
its catalogue of mistakes, its hints), a folder of checks for another layout's files `ADAPTERS`.
A new step is a new folder `checker/steps/stepNN/`, beside its skeleton, solution and book page.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field

STEPS_PACKAGE = "checker.steps"  # the folders found: read by name, so that nothing here imports upward


@dataclass(frozen=True)
class Step:
    """One step's check and what it lends the shared machinery."""

    number: str  # "07"
    check: Callable  # check(path, checkpoint, *, timeout) -> Report
    catalogue: list  # the Mistakes its check can name (checker.reporting.compare.Mistake), each with its Edit
    reads: tuple[str, ...] = ()  # the names its check reads in a file: this course's and the online book's
    prepare: Callable | None = None  # prepare(checkpoint): its references, computed before the check
    probe: object = None  # optional: its piece compiled alone (checker.diagnosis.compiled.Probe), for the diagnosis
    compiles_in_check: bool = False  # its own check compiles its piece too (`pixi run sNN` names it)
    hints: dict = field(default_factory=dict)  # part -> a ladder of hints (`--hint`)
    sources: dict = field(default_factory=dict)  # part -> the solution's code it checks (`--solution`)


@dataclass(frozen=True)
class Adapter:
    """A check beside a step's own, for files of another layout that define `reads`: checked as `step`."""

    step: str
    reads: tuple[str, ...]
    check: Callable  # check(path, checkpoint, *, timeout) -> Report


_STEPS: dict[str, Step] = {}
_ADAPTERS: list[Adapter] = []


def _find() -> None:
    """Every folder of checker/steps/, imported once: its STEP, its ADAPTERS."""
    package = importlib.import_module(STEPS_PACKAGE)
    for found in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{STEPS_PACKAGE}.{found.name}")
        if (declared := getattr(module, "STEP", None)) is not None:
            _STEPS[declared.number] = declared
        _ADAPTERS.extend(getattr(module, "ADAPTERS", ()))


def steps() -> dict[str, Step]:
    """Every step, in order of their numbers."""
    if not _STEPS:
        _find()
    return dict(sorted(_STEPS.items()))


def step(number: str) -> Step:
    return steps()[number]


def adapters() -> list[Adapter]:
    steps()
    return list(_ADAPTERS)
