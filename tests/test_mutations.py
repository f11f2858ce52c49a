"""Steps 03 onwards: each solution passes, each skeleton is TODO in every part,
construction and loading mistakes are explained.
Steps 07, 01 and 02 have their own files; the mistake catalogue of every step
is proven in test_catalogue.py."""


import pytest

from checker.reporting.report import FAIL, PASS, SKIP, TODO
from checker.steps.step03 import check as step03
from checker.steps.step04 import check as step04
from checker.steps.step05 import check as step05
from checker.steps.step06 import check as step06
from checker.steps.step08 import check as step08
from checker.steps.step09 import check as step09
from checker.steps.step10 import check as step10
from checker.steps.step11 import check as step11
from checker.steps.step12 import check as step12
from checker.steps.step13 import check as step13
from runtime.paths import REPO
from tests.conftest import STANDINS, assert_passes_with_margin, mutate, solution_source

CHECKS = {"03": step03, "04": step04, "05": step05, "06": step06, "08": step08, "09": step09, "10": step10,
          "11": step11, "12": step12, "13": step13}

@pytest.mark.slow  # step 11's check, which checks steps 02-10 first: 250 s of a cold default tier
def test_loader_that_drops_a_weight_says_which(checkpoint, write_step):
    """A buffer filter that also matches c_attn.bias: the missing weight is named."""
    source = mutate(solution_source("11"), 'if name.endswith((".attn.bias", ".attn.masked_bias"))',
                    'if name.endswith(("attn.bias", ".attn.masked_bias"))')
    report = step11.check(write_step(source, "step_11.py"), checkpoint)
    failing = [p for p in report.parts if p.status != PASS]
    assert failing and failing[0].name == "loading this checkpoint", report.render()
    assert "missing from what was passed: transformer.h.N.attn.c_attn.bias (all 12 blocks)" in failing[0].summary


# step -> [(text in the solution, replacement, words the construction failure must contain)]
CONSTRUCTION = {
    "03": [("self.bias = Tensor.zeros([dim])  # beta, [C]", "self.beta = Tensor.zeros([dim])", "no parameter bias")],
    "04": [
        ("Linear(config.n_embd, config.n_inner, bias=True)", "Linear(config.n_inner, config.n_embd, bias=True)",
         "arguments look swapped"),
        ("Linear(config.n_inner, config.n_embd, bias=True)", "Linear(config.n_inner, config.n_embd, bias=False)",
         "c_proj has no bias"),
    ],
    "05": [("Tensor.zeros([config.vocab_size, config.n_embd])", "Tensor.zeros([config.n_embd, config.vocab_size])",
            "its two axes are swapped")],
    "10": [("self.h = ModuleList(", "self.blocks = ModuleList(", "no self.h: name it as GPT-2's checkpoint does")],
    "06": [("self.weight = Tensor.zeros([config.n_positions", "self.table = Tensor.zeros([config.n_positions",
            "no parameter weight (it holds table [1024, 768])")],
}


@pytest.mark.parametrize("standin", STANDINS)
@pytest.mark.parametrize("step", CHECKS)
def test_solution_passes(checkpoints, record_property, step, standin):
    report = CHECKS[step].check(REPO / "solutions" / f"solution_{step}.py", checkpoints[standin])
    assert_passes_with_margin(report, step, standin, record_property)


@pytest.mark.parametrize("step", CHECKS)
def test_skeleton_is_todo_in_every_part(checkpoint, step):
    report = CHECKS[step].check(REPO / "steps" / f"step_{step}.py", checkpoint)
    own = [p for p in report.parts if p.name not in ("earlier steps", "compiled")]
    assert [p.status for p in own] == [TODO] * len(own), report.render()
    assert all(p.status == SKIP for p in report.parts if p.name == "compiled"), report.render()
    assert "Traceback" not in report.render()


def test_block_names_the_earlier_step_to_fix_first(checkpoint):
    """The skeletons of steps 09 and 10 use the skeletons of 01-08: the check says to start with 01."""
    for check, step in ((step09, "09"), (step10, "10")):
        report = check.check(REPO / "steps" / f"step_{step}.py", checkpoint)
        earlier = report.part("earlier steps")
        assert earlier.status == FAIL and "01 FAILS" in earlier.summary
        assert earlier.details == ["fix step 01 first: pixi run s01 (or python -m checker 01)"]


@pytest.mark.parametrize(
    "step, old, new, says", [(step, *c) for step, cs in CONSTRUCTION.items() for c in cs]
)
def test_construction_mistake_is_explained(checkpoint, write_step, step, old, new, says):
    path = write_step(mutate(solution_source(step), old, new), f"step_{step}.py")
    report = CHECKS[step].check(path, checkpoint)
    part = report.part("construction")
    assert part.status == FAIL and says in part.summary, report.render()
