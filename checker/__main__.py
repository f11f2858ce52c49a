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

import importlib
import importlib.util
import sys

import runtime
from runtime import paths

# checker.command is imported inside main, once the interpreter and the packages are known good: on a wrong
# Python or without a package, a learner reads what to do instead of an ImportError.


def main(argv: list[str] | None = None) -> int:
    if sys.version_info < (3, 13):
        print(
            f"This course needs Python 3.13 (this is {sys.version.split()[0]}): on 3.11 and 3.12 "
            "MAX's eager operations run 100-1000x slower.\nUse `pixi run sNN`, or a venv made "
            "with python3.13 (see README.md).",
            file=sys.stderr,
        )
        return 2
    runtime.setup()  # before MAX is imported, here or by the check
    missing = _missing_packages()
    if missing:
        print(
            f"Missing Python package(s): {', '.join(missing)}. Install the course's packages with "
            f"`pixi install`, or in your venv (from the repository root): `{paths.INSTALL}`",
            file=sys.stderr,
        )
        return 2
    from checker.command import main as check

    return check(argv)


REQUIRED = ("max", "numpy", "safetensors", "tokenizers", "torch", "transformers")


def _missing_packages() -> list[str]:
    """The packages the checks need that cannot be imported (torch and transformers only by spec: slow to import)."""
    missing = []
    for name in REQUIRED:
        try:
            if name in ("torch", "transformers"):
                found = importlib.util.find_spec(name) is not None
            else:
                importlib.import_module(name)
                found = True
        except ImportError:
            found = False
        if not found:
            missing.append(name)
    return missing


if __name__ == "__main__":
    sys.exit(main())
