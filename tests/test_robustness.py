"""Broken step files (tests/breakage.py) get a short, clear message that points
at the learner's line, never a traceback, never a hang, and the file is left as
it was. The README's troubleshooting table is the same table."""

import hashlib

import pytest

from checker.registry import check_module
from tests.breakage import BREAKAGES
from tests.conftest import solution_source

CASES = [(b, step) for b in BREAKAGES for step in b.steps]
LOOP_LIMIT = 3  # seconds: the time limit the infinite-loop cases run under


@pytest.mark.parametrize("breakage, step", CASES, ids=[f"{s}-{b.name}" for b, s in CASES])
def test_broken_step_gets_a_clear_message(checkpoint, write_step, breakage, step):
    source = breakage.edit(solution_source(step), step)
    path = write_step(source, f"step_{step}.py")
    timeout = LOOP_LIMIT if "infinite loop" in breakage.name else 300
    report = check_module(step).check(path, checkpoint, timeout=timeout)
    text = report.render()
    assert report.ok == breakage.passes, text
    assert breakage.says in text, text
    assert "Traceback" not in text and "mosh" not in text and "site-packages" not in text, text
    if breakage.marker:
        line = next(i for i, s in enumerate(source.splitlines(), 1) if breakage.marker in s)
        assert f"step_{step}.py:{line}" in text or f"step_{step}.py line {line}" in text, text
    assert hashlib.sha256(path.read_bytes()).digest() == hashlib.sha256(source.encode()).digest()
