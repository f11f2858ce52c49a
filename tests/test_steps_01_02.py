"""Steps 01 (config) and 02 (causal mask): solutions pass, skeletons say what
is left, injected mistakes are caught and named."""

import pytest

from checker import step01, step02
from checker.paths import REPO
from checker.report import FAIL, PASS, TODO
from tests.conftest import mutate, solution_source


@pytest.mark.parametrize("module, step", [(step01, "01"), (step02, "02")])
def test_solution_passes(checkpoint, module, step):
    report = module.check(REPO / "solutions" / f"solution_{step}.py", checkpoint)
    assert report.ok, report.render()


@pytest.mark.parametrize("module, step", [(step01, "01"), (step02, "02")])
def test_skeleton_is_todo_in_every_part(checkpoint, module, step):
    report = module.check(REPO / "steps" / f"step_{step}.py", checkpoint)
    assert [p.status for p in report.parts] == [TODO] * len(report.parts), report.render()


@pytest.mark.parametrize(
    "old, new, field, says",
    [
        ("vocab_size: int = 50257", "vocab_size: int = 50256", "vocab_size", "one short"),
        ("n_inner: int = 3072", "n_inner: int = 768", "n_inner", "MLP's hidden layer"),
        ("n_head: int = 12", "n_head: int = 64", "n_head", "head_dim"),
        ("layer_norm_epsilon: float = 1e-5", "layer_norm_epsilon: float = 1e-12", "layer_norm_epsilon", "BERT"),
        ("n_positions: int = 1024", "n_positions: int = 2048", "n_positions", "GPT-3"),
        ("n_embd: int = 768", "n_embd: int = 769", "n_embd", None),
    ],
)
def test_config_mistakes(checkpoint, write_step, old, new, field, says):
    report = step01.check(write_step(mutate(solution_source("01"), old, new), "step_01.py"), checkpoint)
    part = report.part(field)
    assert part.status == FAIL and not report.ok, report.render()
    assert [p.name for p in report.parts if p.status != PASS] == [field]
    if says:
        assert any(says in d for d in part.details), report.render()


MASK_BODY = "return F.band_part(mask, num_lower=None, num_upper=num_tokens, exclude=True)"


@pytest.mark.parametrize(
    "new, mistake, parts",
    [
        ("return F.band_part(mask, num_lower=0, num_upper=None, exclude=True)", "mask-lower", ["no cache"]),
        ("return F.band_part(mask, num_lower=None, num_upper=None, exclude=True)", "mask-none", ["no cache"]),
        ("return F.band_part(mask, num_lower=None, num_upper=num_tokens, exclude=False)", "mask-inverted", ["no cache"]),
        ("return F.band_part(mask, num_lower=None, num_upper=0, exclude=True)", "mask-ignores-cache", ["with cache"]),
    ],
)
def test_mask_mistakes(checkpoint, write_step, new, mistake, parts):
    report = step02.check(write_step(mutate(solution_source("02"), MASK_BODY, new), "step_02.py"), checkpoint)
    failing = [p for p in report.parts if p.status != PASS]
    assert failing and failing[0].name == parts[0], report.render()
    assert failing[0].mistake is not None and failing[0].mistake.id == mistake, report.render()


def test_mask_of_ones_and_square_mask(checkpoint, write_step):
    ones = mutate(solution_source("02"), 'Tensor(float("-inf"),', "Tensor(1.0,")
    report = step02.check(write_step(ones, "step_02.py"), checkpoint)
    assert report.parts[0].mistake.id == "mask-zero-one", report.render()
    square = mutate(solution_source("02"), "total = Dim(sequence_length) + num_tokens", "total = Dim(sequence_length)")
    report = step02.check(write_step(square, "step_02.py"), checkpoint)
    assert report.part("no cache").status == PASS
    cached = report.part("with cache")
    assert cached.status == FAIL and "out of bounds" in cached.summary and "step_02.py:" in cached.summary
    square = mutate(square, MASK_BODY, MASK_BODY.replace("num_upper=num_tokens", "num_upper=0"))
    report = step02.check(write_step(square, "step_02.py"), checkpoint)
    assert report.part("with cache").mistake.id == "mask-square", report.render()


def test_step07_says_to_finish_step02_first(checkpoint, write_step):
    """A learner's step 07 that uses their unfinished step 02 is told so, not shown a traceback."""
    from checker import step07

    source = mutate(solution_source("07"), "from solutions.solution_02 import causal_mask",
                    "from steps.step_02 import causal_mask")
    report = step07.check(write_step(source), checkpoint)
    attn = report.part("_attn")
    assert attn.status == TODO and "finish step 02 first (pixi run s02)" in attn.summary, report.render()
    assert report.part("_split_heads").status == PASS
