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
  wrong   for steps 14 and 15 (whose parts compile a model or a kernel anew
          after each change): a wrong edit never compiled before (WRONG), the
          time to the check's failing verdict

and prints a Markdown table.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from checker import registry
from runtime.paths import REPO, finished_step

# step -> (what, the file under steps/, the finished text, the wrong text): each a change that compiles anew
WRONG = {
    "14": [("attention scaled by 1/head_dim", "step_14.py", "scale=1 / math.sqrt(attn.head_dim)",
            "scale=1 / attn.head_dim")],
    "15": [("the kernel forgets the bias", "solution_15_kernel/matvec.mojo", " = s + bp[unsafe_offset=m + r]", " = s"),
           ("decode's head without ln_f (the kernel right)", "step_15.py", "last = t.ln_f(x[:, -1, :])",
            "last = x[:, -1, :]")],
}


def _timed(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, int]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "checker", *args], env=env, cwd=cwd,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started, done.returncode


def main() -> int:
    rows, wrongs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(tmp) / "clone"
        subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
        for step in registry.steps():
            (clone / "steps" / f"step_{step}.py").write_text(finished_step(step))
        shutil.copytree(REPO / "solutions" / "solution_15_kernel", clone / "steps" / "solution_15_kernel")
        env = dict(os.environ) | {"MODULAR_DERIVED_PATH": str(Path(tmp) / "modular"), "GPT2_WEIGHTS": "synthetic"}
        for step in sorted(registry.steps()):
            first = _timed([step], env, clone)
            warm = _timed([step], env, clone)
            path = clone / "steps" / f"step_{step}.py"
            path.write_text(path.read_text() + "\n# saved again\n")
            after_edit = _timed([step], env, clone)
            rows.append((step, first, warm, after_edit))
            for what, name, right, wrong in WRONG.get(step, []):
                edited = clone / "steps" / name
                text = edited.read_text()
                assert text.count(right) == 1, f"{name} no longer holds {right!r}"
                edited.write_text(text.replace(right, wrong))
                wrongs.append((step, what, _timed([step], env, clone)))
                edited.write_text(text)
    print(f"| step ({os.cpu_count()} CPUs) | cold: first check (s) | warm (s) | warm, after an edit (s) |")
    print("| --- | --- | --- | --- |")
    for step, first, warm, edit in rows:
        print(f"| s{step} | {first[0]:.1f} | {warm[0]:.1f} | {f'{edit[0]:.1f}' if edit else ''} |")
    print(f"\n| a wrong file ({os.cpu_count()} CPUs) | to the failing verdict (s) |")
    print("| --- | --- |")
    for step, what, (seconds, _) in wrongs:
        print(f"| s{step}: {what} | {seconds:.1f} |")
    codes = [t[1] for _, *ts in rows for t in ts if t]
    return 0 if all(code == 0 for code in codes) and all(code == 1 for *_, (_, code) in wrongs) else 1
