"""Steps 01 (config) and 02 (causal mask): solutions pass, skeletons say what
is left, injected mistakes are caught and named."""

import pytest

from checker.reporting.report import FAIL, PASS, SKIP, TODO
from checker.steps.step01 import check as step01
from checker.steps.step02 import check as step02
from runtime.paths import REPO
from tests.conftest import STANDINS, assert_passes_with_margin, mutate, solution_source


@pytest.mark.parametrize("standin", STANDINS)
@pytest.mark.parametrize("module, step", [(step01, "01"), (step02, "02")])
def test_solution_passes(checkpoints, record_property, module, step, standin):
    report = module.check(REPO / "solutions" / f"solution_{step}.py", checkpoints[standin])
    assert_passes_with_margin(report, step, standin, record_property)


@pytest.mark.parametrize("module, step", [(step01, "01"), (step02, "02")])
def test_skeleton_is_todo_in_every_part(checkpoint, module, step):
    report = module.check(REPO / "steps" / f"step_{step}.py", checkpoint)
    own = [p.status for p in report.parts if p.name != "compiled"]
    assert own == [TODO] * len(own), report.render()
    assert all(p.status == SKIP for p in report.parts if p.name == "compiled"), report.render()


def test_square_mask_fails_with_the_cache_and_says_where(checkpoint, write_step):
    """A [T, T] mask passes without a cache; with one, MAX's error is shown with the learner's line."""
    square = mutate(solution_source("02"), "total = Dim(sequence_length) + num_tokens", "total = Dim(sequence_length)")
    report = step02.check(write_step(square, "step_02.py"), checkpoint)
    assert report.part("no cache").status == PASS
    cached = report.part("with cache")
    assert cached.status == FAIL and "out of bounds" in cached.summary and "step_02.py:" in cached.summary


def test_step07_says_to_finish_step02_first(checkpoint, write_step):
    """A learner's step 07 that uses their unfinished step 02 is told so, not shown a traceback."""
    from checker.steps.step07 import check as step07
    source = mutate(solution_source("07"), "from solutions.solution_02 import causal_mask",
                    "from steps.step_02 import causal_mask")
    report = step07.check(write_step(source), checkpoint)
    attn = report.part("_attn")
    assert attn.status == TODO and "finish step 02 first (pixi run s02)" in attn.summary, report.render()
    assert report.part("_split_heads").status == PASS
