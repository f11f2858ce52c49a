"""`--hint` and `--solution`: every part of every step has hints and, where it
checks one piece of code, that code in the solution; hints come one at a time."""

import json
import re

import pytest

from checker import hints, registry
from runtime.paths import REPO
from tests.conftest import run_python, with_mistake


@pytest.mark.parametrize("step", registry.steps())
def test_every_part_has_hints_and_its_reference(checkpoint, step):
    report = registry.step(step).check(REPO / "steps" / f"step_{step}.py", checkpoint)
    for part in report.parts:
        assert len(hints.hints_for(step, part.name)) >= 3, f"fewer than 3 hints for step {step} part {part.name!r}"
        code = hints.reference_code(step, part.name)
        if part.name == "earlier steps":
            assert code is None
        else:
            assert code and f"solutions/solution_{step}.py" in code, part.name


def test_hints_come_one_at_a_time_and_restart_on_another_part(tmp_path, monkeypatch):
    monkeypatch.setattr(hints, "STATE", tmp_path / "hints.json")
    texts = registry.step("07").hints["_attn"]
    for level, text in enumerate(texts, 1):
        assert hints.next_hint("07", "_attn").startswith(f"hint {level} of {len(texts)} for _attn: {text}")
    assert "No more hints for _attn" in hints.next_hint("07", "_attn")
    assert hints.next_hint("07", "forward").startswith("hint 1 of")
    assert hints.next_hint("07", "_attn").startswith("hint 1 of")


def test_solution_shows_only_the_failing_part(checkpoint, write_step):
    path = write_step(with_mistake("07", "no-scale"))
    run = run_python("-m", "checker", "07", "--file", str(path), "--solution")
    assert run.returncode == 1, run.stderr
    assert "The reference for _attn:" in run.stdout, run.stdout
    shown = run.stdout.split("The reference for _attn:")[1]
    assert "def _attn(" in shown and "math.sqrt" in shown
    assert "def _split_heads" not in shown and "def forward" not in shown


def _first_hint_of_04(path):
    """`--hint` on step 04's file with the ladder at its first rung (no hint shown yet), the ladder's file
    put back after."""
    saved = hints.STATE.read_text() if hints.STATE.exists() else None
    try:
        state = json.loads(saved) if saved else {}
        state.pop("04", None)
        hints.STATE.parent.mkdir(parents=True, exist_ok=True)
        hints.STATE.write_text(json.dumps(state))
        return run_python("-m", "checker", "04", "--file", str(path), "--hint")
    finally:
        if saved is None:
            hints.STATE.unlink(missing_ok=True)
        else:
            hints.STATE.write_text(saved)


@pytest.mark.xdist_group("hint-ladder")  # both set step 04's rung in the one ladder file
def test_hint_after_the_report(checkpoint, write_step, tmp_path):
    path = write_step(with_mistake("04", "relu"), "step_04.py")
    run = _first_hint_of_04(path)
    assert run.returncode == 1, run.stderr
    assert "likely mistake: ReLU was used" in run.stdout
    assert "hint " in run.stdout.split("likely mistake")[1] and " for forward: " in run.stdout


@pytest.mark.xdist_group("hint-ladder")
def test_hint_on_a_file_unchanged_since_its_check_reads_the_stored_verdict(checkpoint, write_step):
    """--hint right after a failing check: the stored verdict's first part not passing, not the check again."""
    path = write_step(with_mistake("04", "relu"), "step_04.py")
    checked = run_python("-m", "checker", "04", "--file", str(path))
    assert checked.returncode == 1 and "likely mistake: ReLU was used" in checked.stdout, checked.stderr
    run = _first_hint_of_04(path)
    assert run.returncode == 1, run.stderr
    assert "step_04.py and all it reads" in run.stdout and "unchanged since its last check" in run.stdout, run.stdout
    assert " for forward: " in run.stdout, run.stdout
    assert "likely mistake" not in run.stdout  # the check did not run again
    path.write_text(path.read_text() + "\n")  # changed: the check runs, the report first
    rerun = run_python("-m", "checker", "04", "--file", str(path), "--solution")
    assert "likely mistake: ReLU was used" in rerun.stdout and "unchanged" not in rerun.stdout, rerun.stdout


def _solution_lines(code: str) -> list[str]:
    """The code lines of a reference, without comments, as compared: no spaces, no backticks."""
    lines = []
    for line in code.splitlines()[1:]:  # the first line names the file
        line = re.sub(r"\s+#.*$", "", line).strip()
        if line and not line.startswith(("def ", "class ", '"""', "#", "@")) and len(line.replace(" ", "")) >= 12:
            lines.append(line.replace(" ", ""))
    return lines


@pytest.mark.parametrize("step", registry.steps())
def test_hint_ladders_go_from_idea_to_api_to_code_without_the_solution(step):
    """Every part: at least three rungs; the first is the idea (no link), the second names the API with
    a link to its reference page (but for the earlier-steps part); no rung holds a whole solution line."""
    for part, rungs in registry.step(step).hints.items():
        assert len(rungs) >= 3, (step, part)
        assert "https://" not in rungs[0], (step, part, "the first rung is the idea")
        if part != "earlier":
            assert "https://" in rungs[1], (step, part, "the second rung links the API's reference page")
        code = hints.reference_code(step, part)
        for line in _solution_lines(code or ""):
            for rung in rungs:
                assert line not in rung.replace(" ", "").replace("`", ""), (step, part, line)
