"""`pixi run latency`: how long `pixi run s07` takes, cold and warm.

Runs the step 07 check on the solution as a learner would, in fresh processes:

  cold         MAX's kernel cache empty (a temporary MODULAR_DERIVED_PATH),
               reference outputs already cached
  warm         the same command again
  warm, edited after an edit to the step file (a copy with the scale
               written as a multiplication: a new graph, the same ops)

and prints a Markdown table. Pass --skip-cold to measure only the warm rows.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from checker.paths import REPO, step_file


def _timed(args: list[str], env: dict[str, str]) -> tuple[float, int]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "checker", *args], env=env, cwd=REPO,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started, done.returncode


def main() -> int:
    env = dict(os.environ)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        edited = Path(tmp) / "step_07.py"
        source = step_file("07", solution=True).read_text()
        edited.write_text(source.replace(
            "attn_weights = attn_weights / math.sqrt(int(value.shape[-1]))",
            "attn_weights = attn_weights * (1.0 / math.sqrt(int(value.shape[-1])))",
        ))
        if "--skip-cold" not in sys.argv:
            cold_env = env | {"MODULAR_DERIVED_PATH": str(Path(tmp) / "modular")}
            rows.append(("cold: empty MAX cache", *_timed(["07", "--solution"], cold_env)))
            env = cold_env  # the warm rows reuse what the cold run compiled
        rows.append(("warm: same command again", *_timed(["07", "--solution"], env)))
        rows.append(("warm: after editing the step", *_timed(["07", "--file", str(edited)], env)))
    print(f"| `pixi run s07` ({os.cpu_count()} CPUs) | seconds | exit |\n| --- | --- | --- |")
    for name, seconds, code in rows:
        print(f"| {name} | {seconds:.1f} | {code} |")
    return 0 if all(code == 0 for *_, code in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
