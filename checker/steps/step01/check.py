"""Step 01: the learner's GPT2Config against the checkpoint's config.json.

One part per field. `config.json` is what Hugging Face's `GPT2Config`
serialises; its `n_inner: null` means 4 * n_embd.
"""

from __future__ import annotations

from pathlib import Path

from checker.harness.runner import StepRun
from checker.reporting.report import FAIL, PASS, TODO, Part, Report
from checker.steps.step01.mistakes import MISTAKES
from runtime.checkpoints import Checkpoint
from runtime.learner import LearnerError

CLASS = "GPT2Config"
FIELDS = list(MISTAKES)


def expected(checkpoint: Checkpoint) -> dict[str, object]:
    return {f: getattr(checkpoint.learner_config(), f) for f in FIELDS}


def _same(got, want) -> bool:
    if isinstance(want, float):
        return isinstance(got, (int, float)) and abs(got - want) <= 1e-9 * abs(want)
    return type(got) is int and got == want


def prepare(checkpoint: Checkpoint) -> None:
    """Nothing to compute: the reference is the checkpoint's config.json."""


def check(path: Path, checkpoint: Checkpoint, *, timeout: float = 300.0) -> Report:
    want = expected(checkpoint)
    run = StepRun("01", CLASS, path, checkpoint, f"GPT2Config() against {checkpoint.path.name}/config.json",
                  FIELDS, timeout=timeout)
    step = run.import_step()
    cls = step and run.need(step, CLASS)
    if cls is None:
        return run.finish(f"needs {CLASS}")
    try:
        config = run.call(cls)
    except LearnerError as e:
        run.add(Part.from_error(FIELDS[0], e))
        return run.finish(f"needs {CLASS}() to construct")
    for field in FIELDS:
        if not hasattr(config, field):
            run.add(Part(field, FAIL, f"GPT2Config has no field {field} (use Hugging Face's names)"))
            continue
        got = getattr(config, field)
        if _same(got, want[field]):
            run.add(Part(field, PASS, f"{got!r}", margin=0.0))
        elif got in (0, 0.0) and not isinstance(got, bool):
            run.add(Part(field, TODO, f"still {got!r}: fill in GPT-2 small's value"))
        else:
            known = next((m for value, m in MISTAKES[field].items() if _same(got, value) or got is value), None)
            run.add(Part(field, FAIL, f"{got!r}, expected {want[field]!r}", mistake=known))
    return run.finish()
