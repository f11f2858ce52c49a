"""Which check checks which step: each step's module registers itself here, and the machinery
reads what was registered; it never imports a step's module.

    import checker.steps           registers every step's check (one module per step in checker/steps/)
    register(Step("07", check, CATALOGUE, reads=(...), probe=PROBE))
    register(Adapter("12", ("encode_text", ...), check))   a check for files of another layout
    steps()  -> {"01": Step, ...}  step("07") -> Step     adapters() -> [Adapter, ...]

A new step's check is a new module in checker/steps/ that calls `register`: no machinery module
changes. The course around it does: its place in pyproject.toml's step-order contract (above the
steps it builds on; tests/test_imports.py fails until it is there), its mistakes injected in
tests/injections.py and listed in the book's checks page (tests/test_catalogue.py), its hints in
checker/hints.py, a solution, a skeleton and a `pixi run sNN` task.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """One step's check and what it lends the shared machinery."""

    number: str  # "07"
    check: Callable  # check(path, checkpoint, *, timeout) -> Report
    catalogue: list  # the Mistakes its check can name (checker.catalogue)
    reads: tuple[str, ...] = ()  # the names its check reads in a file: this course's and the online book's
    prepare: Callable | None = None  # prepare(checkpoint): its references, computed before the check
    probe: object = None  # optional: its piece compiled alone (checker.diagnosis.compiled.Probe), for the diagnosis
    compiles_in_check: bool = False  # its own check compiles its piece too (`pixi run sNN` names it)


@dataclass(frozen=True)
class Adapter:
    """A check beside a step's own, for files of another layout that define `reads`: checked as `step`."""

    step: str
    reads: tuple[str, ...]
    check: Callable  # check(path, checkpoint, *, timeout) -> Report


_STEPS: dict[str, Step] = {}
_ADAPTERS: list[Adapter] = []


def register(entry: Step | Adapter) -> None:
    if isinstance(entry, Step):
        _STEPS[entry.number] = entry
    else:
        _ADAPTERS.append(entry)


def steps() -> dict[str, Step]:
    """Every registered step, in order of their numbers."""
    if not _STEPS:
        raise RuntimeError("no step checks are registered: import checker.steps first")
    return dict(sorted(_STEPS.items()))


def step(number: str) -> Step:
    return steps()[number]


def adapters() -> list[Adapter]:
    steps()  # the same guard: adapters register with the steps
    return list(_ADAPTERS)
