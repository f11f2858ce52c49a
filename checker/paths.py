"""Where things live. Everything is relative to the repository root, so the
checks work from any current directory."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STEPS = REPO / "steps"
SOLUTIONS = REPO / "solutions"
WEIGHTS = REPO / "weights"
CACHE = REPO / ".cache"  # reference outputs and stamps; safe to delete


def step_file(step: str, *, solution: bool = False) -> Path:
    """`steps/step_NN.py`, or `solutions/solution_NN.py` with `solution=True`."""
    return SOLUTIONS / f"solution_{step}.py" if solution else STEPS / f"step_{step}.py"


def finished_step(step: str) -> str:
    """Step `step` as a learner who finished it would have it: the solution, importing the learner's own
    earlier steps (steps.step_NN) instead of the solutions."""
    return step_file(step, solution=True).read_text().replace("solutions.solution_", "steps.step_")


def shown(path: Path) -> str:
    """A path as a learner would type it: relative to the repo when inside it."""
    try:
        return str(Path(path).resolve().relative_to(REPO))
    except ValueError:
        return str(path)
