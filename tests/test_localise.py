"""Mistakes the catalogue does not list still fail, and the check says which sub-part is wrong.

tests/held_out.py holds at least three per step whose parts have sub-parts; none of
them is a catalogued mistake, so the check cannot name one: it must probe the
learner's own pieces (checker/diagnosis/localise.py) and say where. Each step's
cases alternate between the two stand-ins (tests/conftest.py: alternating).
"""

import pytest

from checker import registry
from checker.reporting.report import PASS
from tests.conftest import alternating, mutate, solution_source
from tests.held_out import HELD_OUT

CASES = alternating([(step, name) for step, cases in HELD_OUT.items() for name in cases])


@pytest.mark.parametrize("step, name, standin", CASES, ids=[f"{s}-{n}-{k}" for s, n, k in CASES])
def test_uncatalogued_mistake_is_located(checkpoints, write_step, step, name, standin):
    old, new, says = HELD_OUT[step][name]
    report = registry.step(step).check(write_step(mutate(solution_source(step), old, new), f"step_{step}.py"),
                                      checkpoints[standin])
    failing = [p for p in report.parts if p.status != PASS]
    assert failing, f"the check passed {name!r}"
    first = failing[0]
    assert first.mistake is None, f"{name!r} was named {first.mistake.id}: it belongs in the catalogue"
    assert any(says in line for line in first.details), report.render()
    assert "Traceback" not in report.render()


def test_at_least_three_per_step():
    assert all(len(cases) >= 3 for cases in HELD_OUT.values())
    assert set(HELD_OUT) == {"03", "04", "05", "06", "07", "08", "09", "10", "11"}
