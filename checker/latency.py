"""`pixi run latency`: how long `pixi run s07` takes, cold and warm.

Measures the step 07 check of the solution as a learner meets it, each run a
fresh process, in a fresh clone of this repository (its committed state):

  first run     nothing prepared: no checkpoint (the synthetic one is
                generated), no cached references, an empty MAX kernel cache
                (a temporary MODULAR_DERIVED_PATH)
  warm          the same command again
  warm, edited  after an edit to the step file (the scale written as a
                multiplication: a new graph)

and prints a Markdown table.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from checker.paths import REPO


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
        env = dict(os.environ) | {"MODULAR_DERIVED_PATH": str(Path(tmp) / "modular"), "GPT2_WEIGHTS": "synthetic"}
        edited = Path(tmp) / "step_07.py"
        edited.write_text((clone / "solutions" / "solution_07.py").read_text().replace(
            "attn_weights = attn_weights / math.sqrt(int(value.shape[-1]))",
            "attn_weights = attn_weights * (1.0 / math.sqrt(int(value.shape[-1])))",
        ))
        rows.append(("first run: no weights, references or MAX kernels yet", *_timed(["07", "--solution"], env, clone)))
        rows.append(("warm: the same command again", *_timed(["07", "--solution"], env, clone)))
        rows.append(("warm: after editing the step", *_timed(["07", "--file", str(edited)], env, clone)))
    print(f"| `pixi run s07` ({os.cpu_count()} CPUs) | seconds | exit |\n| --- | --- | --- |")
    for name, seconds, code in rows:
        print(f"| {name} | {seconds:.1f} | {code} |")
    return 0 if all(code == 0 for *_, code in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
