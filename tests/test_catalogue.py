"""The mistake catalogue, proven by mutation: every mistake a step's check
lists in CATALOGUE, injected into a copy of the solution (tests/injections.py),
must fail the check and be named as the diagnosis of the first failing part.

The summary table (step, mistakes, caught, named) is printed at the end of the
test run; the book's checks page (book/docs/checks.md) keeps the same figures, and a test holds them together.
"""

import re

import pytest

from checker.catalogue import catalogue
from checker.paths import REPO
from checker import registry
from checker.reporting.report import PASS
from tests.conftest import KERNEL_STEP, STANDINS, kernel_source, mutate, solution_source, write_kernel_step
from tests.injections import INJECTIONS

CASES = [(step, mistake, standin) for step in registry.steps() for mistake in INJECTIONS.get(step, {}) for standin in STANDINS]


@pytest.mark.parametrize("step", registry.steps())
def test_every_catalogued_mistake_has_one_injection(step):
    ids = [m.id for m in catalogue(step)]
    assert len(ids) == len(set(ids)), f"step {step} names two mistakes alike"
    assert sorted(ids) == sorted(INJECTIONS.get(step, {})), "catalogue and injections disagree"


@pytest.mark.parametrize("step", registry.steps())
def test_every_mistake_says_what_and_hints(step):
    for m in catalogue(step):
        assert m.says and m.hint and m.says != m.hint, m.id


@pytest.mark.parametrize("step, mistake, standin", CASES, ids=[f"{s}-{m}-{k}" for s, m, k in CASES])
def test_injected_mistake_is_caught_and_named(checkpoints, write_step, record_property, step, mistake, standin):
    old, new = INJECTIONS[step][mistake]
    if step == KERNEL_STEP:
        path = write_kernel_step(write_step("", "unused").parent, mutate(kernel_source(), old, new))
    else:
        path = write_step(mutate(solution_source(step), old, new), f"step_{step}.py")
    report = registry.step(step).check(path, checkpoints[standin])
    failing = [p for p in report.parts if p.status != PASS]
    named = bool(failing) and failing[0].mistake is not None and failing[0].mistake.id == mistake
    record_property("mutation", [step, mistake, standin, bool(failing), named])
    assert failing, f"the check passed a copy of the solution with {mistake} injected"
    assert named, report.render()
    text = report.render()
    assert f"likely mistake: {failing[0].mistake.says}" in text and f"hint: {failing[0].mistake.hint}" in text
    assert "Traceback" not in text


def test_readme_table_matches_the_catalogue():
    """The checks page's mistake table lists each step's catalogue size, caught and named on each stand-in
    (what this suite enforces: every case above must pass)."""
    readme = (REPO / "book" / "docs" / "checks.md").read_text()
    rows = dict(re.findall(r"^\| (\d\d) \| (\d+)(?: \| \2){4} \|$", readme, re.M))
    assert rows == {step: str(len(catalogue(step))) for step in registry.steps()}, rows
    total = sum(len(catalogue(step)) for step in registry.steps())
    assert re.search(rf"^\| all \| {total}(?: \| {total}){{4}} \|$", readme, re.M)
