"""`--hint` and `--solution`: every part of every step has hints and, where it
checks one piece of code, that code in the solution; hints come one at a time."""

import pytest

from checker import hints
from checker.paths import REPO
from checker.registry import CHECKS, check_module
from tests.conftest import mutate, run_python, solution_source
from tests.injections import INJECTIONS


@pytest.mark.parametrize("step", CHECKS)
def test_every_part_has_hints_and_its_reference(checkpoint, step):
    report = check_module(step).check(REPO / "steps" / f"step_{step}.py", checkpoint)
    for part in report.parts:
        assert hints.hints_for(step, part.name), f"no hints for step {step} part {part.name!r}"
        code = hints.reference_code(step, part.name)
        if part.name == "earlier steps":
            assert code is None
        else:
            assert code and f"solutions/solution_{step}.py" in code, part.name


def test_hints_come_one_at_a_time_and_restart_on_another_part(tmp_path, monkeypatch):
    monkeypatch.setattr(hints, "STATE", tmp_path / "hints.json")
    texts = hints.HINTS["07"]["_attn"]
    for level, text in enumerate(texts, 1):
        assert hints.next_hint("07", "_attn").startswith(f"hint {level} of {len(texts)} for _attn: {text}")
    assert "No more hints for _attn" in hints.next_hint("07", "_attn")
    assert hints.next_hint("07", "forward").startswith("hint 1 of")
    assert hints.next_hint("07", "_attn").startswith("hint 1 of")


def test_solution_shows_only_the_failing_part(checkpoint, write_step):
    path = write_step(mutate(solution_source("07"), *INJECTIONS["07"]["no-scale"]))
    run = run_python("-m", "checker", "07", "--file", str(path), "--solution")
    assert run.returncode == 1, run.stderr
    assert "The reference for _attn:" in run.stdout, run.stdout
    shown = run.stdout.split("The reference for _attn:")[1]
    assert "def _attn(" in shown and "math.sqrt" in shown
    assert "def _split_heads" not in shown and "def forward" not in shown


def test_hint_after_the_report(checkpoint, write_step, tmp_path):
    path = write_step(mutate(solution_source("04"), *INJECTIONS["04"]["relu"]), "step_04.py")
    run = run_python("-m", "checker", "04", "--file", str(path), "--hint")
    assert run.returncode == 1, run.stderr
    assert "likely mistake: ReLU was used" in run.stdout
    assert "hint " in run.stdout.split("likely mistake")[1] and " for forward: " in run.stdout
