"""The course's mistake catalogue: every mistake each step's check can name.

    python -m checker.catalogue        all steps, as Markdown
    python -m checker.catalogue 07     one step

Each step's folder lists its mistakes (checker/steps/stepNN/mistakes.py), each with the edit that
makes it in the solution; the mutation tests (tests/test_catalogue.py) make each one in a copy of
the solution and require the check to fail and to name it.
"""

from __future__ import annotations

import argparse
import sys

from checker import registry
from checker.reporting.compare import Mistake


def catalogue(step: str) -> list[Mistake]:
    return registry.step(step).catalogue


def markdown(steps) -> str:
    lines = []
    for step in steps:
        mistakes = catalogue(step)
        lines += [f"## Step {step} ({len(mistakes)} mistakes)", "", "| id | what the check says | hint |",
                  "|---|---|---|"]
        lines += [f"| `{m.id}` | {m.says} | {m.hint} |" for m in mistakes]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m checker.catalogue", description=__doc__.split("\n\n")[0])
    parser.add_argument("steps", nargs="*", help="the steps to list (default: all)")
    args = parser.parse_args(argv)
    print(markdown([a.zfill(2) for a in args.steps] or list(registry.steps())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
