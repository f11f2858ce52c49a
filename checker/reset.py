"""`pixi run reset NN`: put step NN's skeleton back, after saving your file.

    python -m checker.reset 07

Your steps/step_07.py is copied to .cache/backups/step_07-<date>-<time>.py
first; the skeleton is the file as the repository's last commit holds it
(`git show HEAD:steps/step_07.py`), so work you committed yourself is what
comes back: `--from REV` takes another revision.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time

from checker import registry
from runtime.paths import CACHE, REPO, shown, step_file

BACKUPS = CACHE / "backups"


def skeleton(step: str, revision: str) -> str | None:
    """The step file as `revision` holds it, or None (no git, or no such file there)."""
    try:
        done = subprocess.run(["git", "show", f"{revision}:steps/step_{step}.py"], cwd=REPO,
                              capture_output=True, text=True)
    except OSError:
        return None
    return done.stdout if done.returncode == 0 else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m checker.reset", description=__doc__.split("\n")[0])
    parser.add_argument("step", help="step number, e.g. 07")
    parser.add_argument("--from", dest="revision", default="HEAD", help="git revision to take the skeleton from")
    args = parser.parse_args(argv)
    step = args.step.zfill(2)
    if step not in registry.steps():
        parser.error(f"no step {step} (have: {', '.join(registry.steps())})")
    path = step_file(step)
    original = skeleton(step, args.revision)
    if original is None:
        print(f"Could not read steps/step_{step}.py from git ({args.revision}): is this a git clone of the "
              "course? Nothing was changed.", file=sys.stderr)
        return 1
    current = path.read_text() if path.exists() else None
    if current == original:
        print(f"{shown(path)} is already the skeleton: nothing to do.")
        return 0
    if current is not None:
        BACKUPS.mkdir(parents=True, exist_ok=True)
        backup = BACKUPS / f"step_{step}-{time.strftime('%Y%m%d-%H%M%S')}.py"
        shutil.copyfile(path, backup)
        print(f"Saved your {shown(path)} as {shown(backup)}.")
    path.write_text(original)
    print(f"{shown(path)} is the skeleton again ({args.revision}). Check it: pixi run s{step}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
