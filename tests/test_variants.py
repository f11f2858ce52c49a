"""Correct implementations in other styles pass every step's check: the whole-file
variants in tests/variants/ and the edits of the solutions in tests/styles.py,
at least three per step, each step's taking the two stand-ins in turn
(tests/conftest.py: alternating). Steps 15-17's timing reports are left out (`untimed`): a
correct implementation is held to the verdicts."""

from pathlib import Path

import pytest

from checker import registry
from tests.conftest import add_kernel, alternating, assert_passes_with_margin, mutate, solution_source
from tests.styles import STYLES

VARIANTS = Path(__file__).parent / "variants"
FILES = sorted(p.name for p in VARIANTS.glob("step*.py"))
FILE_CASES = alternating([(name,) for name in FILES], step_of=lambda case: case[0][4:6])
EDITS = alternating([(step, name) for step, styles in STYLES.items() for name in styles])


@pytest.mark.parametrize("variant, standin", FILE_CASES, ids=[f"{v}-{k}" for v, k in FILE_CASES])
def test_variant_file_passes(checkpoints, record_property, untimed, variant, standin):
    report = registry.step(variant[4:6]).check(VARIANTS / variant, checkpoints[standin])
    assert_passes_with_margin(report, variant[4:6], standin, record_property)


@pytest.mark.parametrize("step, name, standin", EDITS, ids=[f"{s}-{n}-{k}" for s, n, k in EDITS])
def test_style_edit_passes(checkpoints, record_property, write_step, untimed, step, name, standin):
    old, new = STYLES[step][name]
    path = write_step(mutate(solution_source(step), old, new), f"step_{step}.py")
    add_kernel(path, step)  # the kernel's Mojo package beside it, unchanged
    report = registry.step(step).check(path, checkpoints[standin])
    assert_passes_with_margin(report, step, standin, record_property)


@pytest.mark.parametrize("step", registry.steps())
def test_at_least_three_styles_per_step(step):
    count = sum(f[4:6] == step for f in FILES) + len(STYLES.get(step, {}))
    assert count >= 3, f"step {step} has {count} correct variants"
