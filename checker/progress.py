"""`pixi run progress`: where you are in the course, one line per step.

    python -m checker.progress

Each step's verdict comes from the cache (checker.harness.verdicts) while neither its
file nor the steps it uses nor the checks changed; otherwise its check runs
now and is cached. A step is "not started" while every part of its own is
still a TODO.
"""

from __future__ import annotations

import argparse
import sys

import runtime
from checker import registry
from checker.harness import verdicts
from checker.reporting.report import PASS, TODO
from runtime.checkpoints import checkpoint_for_command
from runtime.paths import step_file

STEPS = list(registry.steps())
OWN = lambda name: name not in ("earlier steps", "compiled")  # noqa: E731  (the parts a skeleton leaves TODO)


def status(entry: dict) -> tuple[str, str]:
    """('pass' | 'fail' | 'not started', the first part that does not pass).

    A step whose earlier steps fail is "fail" (at "earlier steps") however far its own file is.
    """
    parts = entry["parts"]
    if entry["ok"]:
        return "pass", ""
    first = next((name for name, st in parts if st != PASS), "")
    if first != "earlier steps" and all(st == TODO for name, st in parts if OWN(name)):
        return "not started", first
    return "fail", first


def statuses(checkpoint, *, run: bool = True, timeout: float = 300) -> dict[str, tuple[str, str] | None]:
    """Every step's status; with run=False, only the cached ones (None for the others)."""
    found = {}
    for step in STEPS:
        path = step_file(step)
        entry = (verdicts.verdict(step, path, checkpoint, timeout=timeout) if run
                 else verdicts.lookup(step, path, checkpoint))
        found[step] = status(entry) if entry else None
    return found


def bar(done: int, total: int = len(STEPS), width: int = 24) -> str:
    filled = round(width * done / total)
    return f"[{'#' * filled}{'-' * (width - filled)}] {done}/{total} steps pass"


def table(found: dict[str, tuple[str, str] | None]) -> str:
    lines = ["| step | file | status | first failing part |", "| --- | --- | --- | --- |"]
    for step, st in found.items():
        state, first = st or ("not checked", "")
        lines.append(f"| {step} | steps/step_{step}.py | {state} | {first} |")
    done = sum(1 for st in found.values() if st and st[0] == "pass")
    return "\n".join(lines + ["", bar(done)])


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m checker.progress", description=__doc__.split("\n\n")[0]).parse_args(argv)
    runtime.setup()
    if (checkpoint := checkpoint_for_command()) is None:
        return 2
    found = statuses(checkpoint)
    print(table(found))
    todo = next((s for s, st in found.items() if st and st[0] != "pass"), None)
    if todo:
        print(f"Next: pixi run s{todo} (python -m checker {todo}); stuck? pixi run s{todo} --hint")
    return 0


if __name__ == "__main__":
    sys.exit(main())
