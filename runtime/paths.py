"""Where things live. Everything is relative to the repository root, so the
checks work from any current directory."""

import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STEPS = REPO / "steps"
SOLUTIONS = REPO / "solutions"
WEIGHTS = REPO / "weights"
CACHE = REPO / ".cache"  # reference outputs and stamps; safe to delete

# The pip set-up, from the repository root (README's "Set up"; .ci/run runs the same lines): a venv, then
# every package at the version requirements.lock pins, then the course itself (editable, nothing more).
VENV = "python3.13 -m venv .venv && . .venv/bin/activate"
INSTALL = "pip install -r requirements.lock && pip install --no-deps -e ."


def step_file(step: str, *, solution: bool = False) -> Path:
    """`steps/step_NN.py`, or `solutions/solution_NN.py` with `solution=True`."""
    return SOLUTIONS / f"solution_{step}.py" if solution else STEPS / f"step_{step}.py"


def finished_step(step: str) -> str:
    """Step `step` as a learner who finished it would have it: the solution, importing the learner's own
    earlier steps (steps.step_NN) instead of the solutions, its Mojo package the learner's (step_NN_kernel)."""
    source = step_file(step, solution=True).read_text().replace("solutions.solution_", "steps.step_")
    return re.sub(r"\bsolution_(\d\d)_kernel\b", r"step_\1_kernel", source)


def shown(path: Path) -> str:
    """A path as a learner would type it: relative to the repo when inside it."""
    try:
        return str(Path(path).resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def save(path: Path, write) -> bool:
    """Writes `path` with `write(tmp)` into a file of this process's own, then renames it over `path`: a
    check running beside this one reads the old file or the new, never half of one. False when the
    folder is read-only (what was computed is then simply not kept)."""
    tmp = path.with_name(f".{os.getpid()}.{path.name}")  # the same suffix: np.savez keeps the name as it is
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write(tmp)
        tmp.replace(path)
        return True
    except OSError:
        return False
