"""Broken step files (tests/breakage.py) get a short, clear message that points
at the learner's line, never a traceback, never a hang, and the file is left as
it was. The book's troubleshooting page (book/docs/troubleshooting.md) has the same table."""

import hashlib

import pytest

from checker import registry
from runtime.paths import REPO
from tests.breakage import BREAKAGES, MACHINE, at_start, troubleshooting_rows
from tests.conftest import run_python, solution_source

CASES = [(b, step) for b in BREAKAGES for step in b.steps]
LOOP_LIMIT = 3  # seconds: the time limit the infinite-loop cases run under


@pytest.mark.parametrize("breakage, step", CASES, ids=[f"{s}-{b.name}" for b, s in CASES])
def test_broken_step_gets_a_clear_message(checkpoint, write_step, breakage, step):
    source = breakage.edit(solution_source(step), step)
    path = write_step(source, f"step_{step}.py")
    timeout = LOOP_LIMIT if "infinite loop" in breakage.name else 300
    report = registry.step(step).check(path, checkpoint, timeout=timeout)
    text = report.render()
    assert report.ok == breakage.passes, text
    assert breakage.says in text, text
    assert "Traceback" not in text and "mosh" not in text and "site-packages" not in text, text
    if "infinite loop" in breakage.name:  # the learner waits one time limit, not one a part
        assert text.count("no result after") == 1, text
    if breakage.marker:
        line = next(i for i, s in enumerate(source.splitlines(), 1) if breakage.marker in s)
        assert f"step_{step}.py:{line}" in text or f"step_{step}.py line {line}" in text, text
    assert hashlib.sha256(path.read_bytes()).digest() == hashlib.sha256(source.encode()).digest()


def test_a_file_that_is_not_python_gets_a_clear_message(checkpoint, tmp_path):
    """`--file` given a text file or a folder: one line saying a step is a .py file, not importlib's traceback."""
    notes = tmp_path / "notes.txt"
    notes.touch()
    for given in (notes, tmp_path):
        report = registry.step("07").check(given, checkpoint, timeout=60)
        assert not report.ok and "is not a Python file: a step is a .py file" in report.render(), report.render()


def test_readme_troubleshooting_is_this_table():
    page = (REPO / "book" / "docs" / "troubleshooting.md").read_text()
    missing = [row for row in troubleshooting_rows() if row not in page.splitlines()]
    assert not missing, "book/docs/troubleshooting.md lacks (or words differently):\n" + "\n".join(missing)


def test_code_stuck_outside_python_is_stopped(checkpoint, write_step):
    """Native code (a MAX compile, say) ignores the alarm until it returns; the watchdog stops the check.
    Blocking SIGALRM makes a Python sleep behave like such code."""
    stuck = "__import__('signal').pthread_sigmask(0, {14}); __import__('time').sleep(600)"  # SIG_BLOCK, SIGALRM
    path = write_step(at_start(stuck)(solution_source("04"), "04"), "step_04.py")
    run = run_python("-m", "checker", "04", "--file", str(path), "--timeout", "2", timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    assert MACHINE["code stuck inside MAX (a compile that never ends)"].says in run.stdout
    assert "Traceback" not in run.stderr


def test_a_kernel_stopped_by_its_time_limit_cuts_the_verdict_short(monkeypatch, tmp_path):
    """A kernel's child process past its limit (a right kernel on a loaded machine can be) counts as a time limit
    reached, as learner code stopped in this process does: the verdict is cut short and not kept, so a later
    step's check does not remember the step as failing."""
    import subprocess

    import numpy as np

    from checker.running import mojo
    from runtime import learner

    def slow(*args, timeout, **kwargs):
        raise subprocess.TimeoutExpired(args[0], timeout)

    monkeypatch.setattr(mojo.subprocess, "run", slow)
    before = learner.limits_hit()
    with pytest.raises(learner.LearnerError, match="did not finish"):
        mojo.run_kernel(tmp_path / "step_16.py", "matvec_q8", {"a case": [np.zeros(2, np.float32)]}, timeout=1.0,
                        indices="")
    assert learner.limits_hit() == before + 1


@pytest.mark.parametrize("late", ["start", "request", "a server that stopped"])
def test_a_server_past_its_time_limit_cuts_the_verdict_short(monkeypatch, tmp_path, late):
    """max serve still starting at its limit, or a request past the client's, counts as a time limit reached (a
    cold compile on a loaded machine can take that long): the served part fails and the verdict is not kept. A
    server that stopped is a failure, kept."""
    from types import SimpleNamespace

    import httpx
    import openai

    from checker.reporting.report import FAIL
    from checker.steps.step14 import served
    from runtime import learner, server

    class Started:
        def __init__(self, *args, **kwargs):
            pass

        def __enter__(self):
            if late == "start":
                raise server.ServerTimeout("max serve was not ready after 900 s:\n(compiling)")
            if late == "a server that stopped":
                raise server.ServerError("max serve stopped (exit code 1) before it was ready:\nTraceback")
            return self

        def __exit__(self, *exc):
            pass

    def checks(started, checkpoint):
        raise openai.APITimeoutError(request=httpx.Request("POST", "http://127.0.0.1:1/v1/completions"))

    monkeypatch.setattr(served, "Server", Started)
    before = learner.limits_hit()
    part = served.served_part(tmp_path / "step_14.py", SimpleNamespace(path=tmp_path), checks)
    assert part.status == FAIL
    assert learner.limits_hit() == before + (late != "a server that stopped")
