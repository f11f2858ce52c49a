"""What the course's other commands (`gpt2`, `bench`) use of the grader: whether a step passes, and which
step to look at when the whole model differs from Hugging Face. Everything else they need is in `runtime`.

    cached_verdict(step, path, checkpoint)            -> {"ok": bool, "parts": ...} or None
    verdict(step, path, checkpoint, timeout=300)      -> the same, the check run now when nothing is cached
    which_step(model_module, checkpoint, error=None)  -> lines naming the first step whose piece differs
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from checker.diagnosis.compiled import diagnose
from checker.harness import verdicts
from checker.harness.deps import used_modules
from checker.harness.runner import StepRun
from checker.references.reference import activations
from runtime.checkpoints import Checkpoint
from runtime.learner import LearnerError


def cached_verdict(step: str, path: Path, checkpoint: Checkpoint) -> dict | None:
    """Step `step`'s verdict on the file at `path`, while nothing it depends on changed; else None."""
    return verdicts.lookup(step, path, checkpoint)


def verdict(step: str, path: Path, checkpoint: Checkpoint, *, timeout: float = 300) -> dict:
    """The cached verdict, or the check run now (and kept), as `pixi run sNN` runs it."""
    return verdicts.verdict(step, path, checkpoint, timeout=timeout)


def which_step(model: ModuleType, checkpoint: Checkpoint, error: LearnerError | None = None) -> list[str]:
    """Each step piece the learner's step 11 file `model` uses, compiled alone as the whole model is and
    compared with Hugging Face: lines naming the first that differs (or cannot compile, when `error`
    is why the whole model did not)."""
    run = StepRun("11", "diagnosis", Path(model.__file__), checkpoint, "", [], timeout=0)
    return diagnose(used_modules(model), checkpoint, activations(checkpoint), run, error)
