"""Step 07: the check passes the solution, explains construction mistakes, points
at the broken part, and survives MAX errors, endless loops, printing and syntax
errors. Its mistakes are proven in test_catalogue.py, its variants in test_variants.py."""

from pathlib import Path

import pytest

from checker.reporting.report import FAIL, PASS, SKIP, TODO
from checker.steps.step07 import check as step07
from runtime.paths import REPO
from tests.conftest import STANDINS, assert_passes_with_margin, mutate, run_python, solution_source

PARTS = ["construction", "_split_heads", "_merge_heads", "_attn", "forward", "compiled"]


@pytest.mark.parametrize("standin", STANDINS)
def test_solution_passes_every_part(checkpoints, record_property, standin):
    report = step07.check(REPO / "solutions" / "solution_07.py", checkpoints[standin])
    assert [p.name for p in report.parts] == PARTS
    assert_passes_with_margin(report, "07", standin, record_property)


def test_untouched_skeleton_reports_not_implemented_per_part(checkpoint):
    report = step07.check(REPO / "steps" / "step_07.py", checkpoint)
    assert [p.status for p in report.parts] == [TODO] * 5 + [SKIP], report.render()
    for part in report.parts[1:5]:
        assert part.summary.startswith("not implemented yet (steps/step_07.py:")
    assert "Traceback" not in report.render()
    assert not report.ok


@pytest.mark.parametrize(
    "old, new, says",
    [
        ("Linear(self.embed_dim, 3 * self.embed_dim, bias=True)",
         "Linear(3 * self.embed_dim, self.embed_dim, bias=True)", "arguments look swapped"),
        ("Linear(self.embed_dim, self.embed_dim, bias=True)",
         "Linear(self.embed_dim, self.embed_dim, bias=False)", "c_proj has no bias"),
        ("self.c_attn = Linear(", "self.qkv = Linear(",
         "no self.c_attn: name it as GPT-2's checkpoint does (c_attn.*)"),
    ],
)
def test_construction_mistakes_are_explained(checkpoint, write_step, old, new, says):
    report = step07.check(write_step(mutate(solution_source("07"), old, new)), checkpoint)
    assert report.parts[0].status == FAIL and says in report.parts[0].summary, report.render()
    assert report.part("forward").status != PASS


def test_forward_failure_points_at_the_broken_part(checkpoint, write_step):
    source = mutate(solution_source("07"), "attn_weights = attn_weights + mask  # future positions -> -inf", "pass")
    forward = step07.check(write_step(source), checkpoint).part("forward")
    assert forward.status == FAIL and forward.mistake.id == "no-causal-mask"
    assert any("_attn" in d and "first" in d for d in forward.details)


def test_max_errors_are_translated(checkpoint, write_step):
    source = mutate(solution_source("07"), "return tensor.reshape(new_shape)  # [B, T, C]",
                    "return tensor.reshape([2, 5])")
    part = step07.check(write_step(source), checkpoint).part("_merge_heads")
    assert part.status == FAIL
    assert ("MAX could not build reshape: input float32 [2, 10, 12, 64], new_shape [2, 5]. "
            "reshape keeps the number of elements: 15360 vs 10") in part.summary
    assert "number of elements must match" in part.summary and "step_07.py:" in part.summary
    assert "mosh" not in part.summary and "Failed to infer" not in part.summary


def _cli(*args):
    return run_python("-m", "checker", "07", *args, cwd=Path("/"))


def test_command_exits_zero_only_when_every_part_passes(checkpoint, write_step):
    good = _cli("--check-solution")
    assert good.returncode == 0, good.stdout + good.stderr
    assert good.stdout.splitlines()[0].startswith("Weights: SYNTHETIC")
    bad = _cli("--file", str(write_step(mutate(solution_source("07"), "axis=-1)", "axis=-2)"))))
    assert bad.returncode == 1 and "softmax ran over the query axis" in bad.stdout
    todo = _cli()
    assert todo.returncode == 1 and "Traceback" not in todo.stdout + todo.stderr


def test_infinite_loop_hits_the_time_limit(checkpoint, write_step):
    source = mutate(solution_source("07"),
                    '"""Causal scaled dot-product attention, per head: [B, H, T, D] x 3 -> [B, H, T, D]"""',
                    '"""Loops forever."""\n        while True:\n            pass')
    report = step07.check(write_step(source), checkpoint, timeout=2)
    attn = report.part("_attn")
    assert attn.status == FAIL and "no result after 2 s" in attn.summary
    assert report.part("_split_heads").status == PASS  # the other parts still ran


def test_printing_stays_out_of_the_verdict(checkpoint, write_step):
    source = mutate(solution_source("07"), '        """[B, T, C] -> [B, T, C]"""\n',
                    '        """[B, T, C] -> [B, T, C]"""\n        print("debug: in forward")\n')
    report = step07.check(write_step(source), checkpoint)
    assert report.ok, report.render()
    assert "debug: in forward" in report.printed
    verdict, _, printed = report.render().partition("your code printed")
    assert "debug" not in verdict and "debug: in forward" in printed


def test_syntax_error_points_at_the_line(checkpoint, write_step):
    source = mutate(solution_source("07"), "self.num_heads = config.n_head", "self.num_heads = config.n_head)")
    report = step07.check(write_step(source), checkpoint)
    first = report.parts[0]
    assert first.status == FAIL and "SyntaxError" in first.summary and "line 31" in first.summary
    assert all(p.status == "SKIP" for p in report.parts[1:])
