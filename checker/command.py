"""`python -m checker NN`: check step NN (the `pixi run sNN` tasks).

    python -m checker 07                  check steps/step_07.py
    python -m checker 07 --hint           ... and show the next hint for the first failing part
    python -m checker 07 --solution       ... and show the solution's code for that part only
    python -m checker 07 --explore        ... and show what multi-head attention is (parameters, one head, loops)
    python -m checker 07 --check-solution check solutions/solution_07.py instead
    python -m checker 07 --file PATH      check another copy of the step
    python -m checker 07 --timeout 60     time limit per call into your code, in seconds

Exit status: 0 if every part passes, 1 if any part fails, 2 if the check
itself could not run (for example, unreadable weights).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from checker import hints, registry, warmup
from checker.harness import layout, verdicts
from checker.harness.runner import prepare
from checker.reporting.report import PASS, use_color
from runtime.checkpoints import WeightsError, find_checkpoint
from runtime.paths import REPO, step_file


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m checker", description=__doc__.split("\n")[0])
    parser.add_argument("step", help="step number, e.g. 07")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--check-solution", action="store_true", help="check the reference solution")
    which.add_argument("--file", type=Path, help="check this file instead of steps/step_NN.py")
    helps = parser.add_mutually_exclusive_group()
    helps.add_argument("--hint", action="store_true", help="show the next hint for the first failing part")
    helps.add_argument("--solution", action="store_true",
                       help="show the solution's code for the first failing part only")
    helps.add_argument("--explore", action="store_true",
                       help="step 07: parameter count, single-head and explicit-loop equivalences")
    parser.add_argument(
        "--timeout", type=float, default=float(os.environ.get("GPT2_CHECK_TIMEOUT", 300)),
        help="seconds allowed per call into your code (default 300; 0 for none)",
    )
    args = parser.parse_args(argv)
    step = args.step.zfill(2)

    if step not in registry.steps():
        parser.error(f"no check for step {step} yet (have: {', '.join(registry.steps())})")

    path = (args.file.resolve() if args.file else step_file(step, solution=args.check_solution))
    number, step = step, layout.place(path, step).step  # the course step the file is (another layout's number)
    started = time.perf_counter()
    try:
        checkpoint = find_checkpoint() if args.hint or args.solution else None
        if checkpoint and (stored := _stored_help(step, path, checkpoint, args.hint)) is not None:
            print(stored[0])
            return 0 if stored[1] else 1
        workers = warmup.start(step)  # compiles in the background while references load
        checkpoint = checkpoint or find_checkpoint()
        prepare(step, checkpoint)
        warmup.finish(workers)
        warmup.load(step)  # the course's kernels, before the learner's code asks for them one by one
        warmup.announce_compiles()
        report = layout.check(step, path, checkpoint, timeout=args.timeout, number=number)
    except WeightsError as e:
        print(f"Weights problem: {e}", file=sys.stderr)
        return 2

    verdicts.store(step, path, checkpoint, report)
    print(report.render(color=use_color()))
    print(f"({time.perf_counter() - started:.1f} s)")
    if args.hint or args.solution:
        print("\n" + _help(step, [(p.name, p.status) for p in report.parts], args.hint))
    if args.explore:
        return _explore(step, path, report, args.timeout)
    return 0 if report.ok else 1


def _explore(step: str, path: Path, report, timeout: float) -> int:
    """`--explore` (step 07): once the check passes, the equivalences of `python -m explore.equivalence` on the
    checked file, run as that command runs them."""
    if step != "07":
        print("\n--explore is for step 07 (multi-head attention).")
        return 2
    if not report.ok:
        print("\n--explore runs once every part above passes.")
        return 1
    print(flush=True)
    return subprocess.run([sys.executable, "-m", "explore.equivalence", "--file", str(path), "--timeout",
                           str(timeout)], cwd=REPO).returncode


def _stored_help(step: str, path: Path, checkpoint, hint: bool) -> tuple[str, bool] | None:
    """--hint or --solution on a file unchanged since its last check (nor anything it reads, nor the checker):
    the help for that verdict's first part not passing, without the check again; (text, passed) or None."""
    found = verdicts.lookup(step, path, checkpoint)
    if found is None or found.get("cut_short"):
        return None
    passed = sum(status == PASS for _, status in found["parts"])
    return (f"({path.name} and all it reads (the steps it imports, the kernels beside them) are unchanged since "
            f"its last check, {passed} of {len(found['parts'])} parts passing: "
            f"pixi run s{step} shows its report again; not re-run here)\n\n{_help(step, found['parts'], hint)}",
            found["ok"])


def _help(step: str, parts: list, hint: bool) -> str:
    """The next hint, or the reference code, for the first of (name, status) `parts` that does not pass."""

    name = next((name for name, status in parts if status != PASS), None)
    if name is None:
        return "Every part passes: nothing to hint at."
    if hint:
        return hints.next_hint(step, name)
    code = hints.reference_code(step, name)
    if code is None:
        return f"{name} has no code of its own to show: follow its message above."
    return f"The reference for {name}:\n\n{code}"
