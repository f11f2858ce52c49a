"""`pixi run bench --checks`: how long each step's check takes, cold and warm.

Runs every step's check as a learner meets them, in order, each a fresh
process, in a fresh clone of this repository (its committed state) whose
steps/ hold finished steps (the solutions, importing each other), with an
empty MAX cache (a temporary MODULAR_DERIVED_PATH) and no checkpoint or
references yet:

  cold    the step's first check on this machine (step 01's also generates
          the synthetic checkpoint and the reference outputs)
  warm    the same command again
  edited  after the step's own file is saved again with a change (a comment
          added): the step is checked anew, the earlier steps it uses come
          from the verdict cache (checker.harness.verdicts)

and prints a Markdown table.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from checker.paths import REPO, finished_step
import checker.steps  # noqa: F401  (every step registers its check)
from checker import registry


def _timed(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, int]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "checker", *args], env=env, cwd=cwd,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started, done.returncode


def main() -> int:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(tmp) / "clone"
        subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
        for step in registry.steps():
            (clone / "steps" / f"step_{step}.py").write_text(finished_step(step))
        env = dict(os.environ) | {"MODULAR_DERIVED_PATH": str(Path(tmp) / "modular"), "GPT2_WEIGHTS": "synthetic"}
        for step in sorted(registry.steps()):
            first = _timed([step], env, clone)
            warm = _timed([step], env, clone)
            path = clone / "steps" / f"step_{step}.py"
            path.write_text(path.read_text() + "\n# saved again\n")
            after_edit = _timed([step], env, clone)
            rows.append((step, first, warm, after_edit))
    print(f"| step ({os.cpu_count()} CPUs) | cold: first check (s) | warm (s) | warm, after an edit (s) |")
    print("| --- | --- | --- | --- |")
    for step, first, warm, edit in rows:
        print(f"| s{step} | {first[0]:.1f} | {warm[0]:.1f} | {f'{edit[0]:.1f}' if edit else ''} |")
    codes = [t[1] for _, *ts in rows for t in ts if t]
    return 0 if all(code == 0 for code in codes) else 1
