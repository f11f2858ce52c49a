"""The mistake catalogue, proven by mutation: every mistake a step's check
lists in its catalogue, made in a copy of the solution by its own edit (Mistake.edit,
in checker/steps/stepNN/mistakes.py), must fail the check and be named as the
diagnosis of the first failing part.

The summary table (step, mistakes, caught, named) is printed at the end of the
test run; the book's checks page (book/docs/checks.md) keeps the same figures, and a test holds them together.

The correct styles of tests/styles.py are edits of the solutions too: each must still apply to its solution.
"""

import re

import pytest

from checker import registry
from checker.catalogue import catalogue
from checker.reporting.report import PASS
from runtime.paths import REPO
from tests.conftest import alternating, catalogued, kernel_source, mutate, solution_source, write_mistake
from tests.styles import STYLES

CASES = alternating([(step, m.id) for step in registry.steps() for m in catalogue(step)])


def _in_mojo(step: str, mistake: str) -> bool:
    return bool(catalogued(step, mistake).edit.file)


# The kernel mistakes of steps 16 and 17 in Mojo after each step's first: each a Mojo compile (~85 s), in the
# heavy tier for CI's time. CI still names every one of them from its outputs, through the same judge
# (tests/test_step16.py, tests/test_step17.py), and step 15's kernel mistakes and each step's first run as
# Mojo in the slow tier.
_HEAVY_MOJO = {mistake for later in ("16", "17", "18")
               for mistake in [m for step, m, _ in CASES if step == later and _in_mojo(step, m)][1:]}
PARAMS = [pytest.param(*case, id=f"{case[0]}-{case[1]}-{case[2]}",
                       marks=[pytest.mark.heavy] if case[0] in ("16", "17", "18") and case[1] in _HEAVY_MOJO else [])
          for case in CASES]


@pytest.mark.parametrize("step", registry.steps())
def test_every_catalogued_mistake_has_an_edit_that_applies_once(step):
    ids = [m.id for m in catalogue(step)]
    assert len(ids) == len(set(ids)), f"step {step} names two mistakes alike"
    for m in catalogue(step):
        assert m.edit is not None, f"{m.id} has no edit: the suite cannot make it"
        source = kernel_source(step) if m.edit.file else solution_source(step)
        assert mutate(source, m.edit.old, m.edit.new) != source, m.id


def test_every_style_edit_applies_once_and_leaves_python():
    """Each correct style of tests/styles.py, an edit of a solution, applies once to the solution as it is now and
    leaves a file Python reads. Those styles' checks run in the slow and heavy tiers; a solution changed under an
    edit shows here, in the default tier, first."""
    for step, styles in STYLES.items():
        source = solution_source(step)
        for name, (old, new) in styles.items():
            edited = mutate(source, old, new)
            assert edited != source, (step, name)
            compile(edited, f"solution_{step}.py, edited: {name}", "exec")


@pytest.mark.parametrize("step", registry.steps())
def test_every_mistake_says_what_and_hints(step):
    for m in catalogue(step):
        assert m.says and m.hint and m.says != m.hint, m.id


@pytest.mark.parametrize("step, mistake, standin", PARAMS)
def test_injected_mistake_is_caught_and_named(checkpoints, write_step, record_property, step, mistake, standin):
    path = write_mistake(write_step("", "unused").parent, step, mistake)
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
    """The checks page's mistake table lists each step's catalogue size, how many run on each stand-in
    (alternating) and how many are caught and named (what this suite enforces: every case above must pass)."""
    page = (REPO / "book" / "docs" / "checks.md").read_text()
    readme = page[page.index("| step | mistakes | on synthetic"):]
    readme = readme[:readme.index("\n\n")]
    rows = {step: tuple(map(int, counts.split(" | "))) for step, counts in
            re.findall(r"^\| (\d\d) \| ([\d |]+?) \|$", readme, re.M)}
    expected = {}
    for step in registry.steps():
        n = len(catalogue(step))
        expected[step] = (n, sum(k == "synthetic" for s, _, k in CASES if s == step),
                          sum(k == "scale" for s, _, k in CASES if s == step), n, n)
    assert rows == expected, rows
    total = tuple(map(sum, zip(*expected.values())))
    assert re.search(r"^\| all \| " + " \\| ".join(map(str, total)) + r" \|$", readme, re.M)
