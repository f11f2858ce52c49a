"""Shared fixtures: the stand-in checkpoints, warm kernels, and a way to check a copy of a step.

The suite uses the stand-ins only (GPT2_WEIGHTS=synthetic by default), so its
results do not depend on what a machine has downloaded: `checkpoint` is the
default stand-in, `checkpoints[standin]` either of the two, for the tests that
must hold on both (solutions, variants, styles, every catalogued mistake).
"""

import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

os.environ["GPT2_WEIGHTS"] = "synthetic"

from checker import warmup  # noqa: E402
from checker.paths import REPO  # noqa: E402
from checker.weights import find_checkpoint  # noqa: E402


STANDINS = ("synthetic", "scale")


@pytest.fixture(scope="session")
def checkpoints():
    """{"synthetic": ..., "scale": ...}: both stand-ins, their references computed."""
    from checker.registry import prepare

    workers = warmup.start("11")  # compiles the kernels of every step while the references are computed
    found = {standin: find_checkpoint(standin) for standin in STANDINS}
    for ckpt in found.values():
        prepare("12", ckpt)  # the activations every step uses, and step 12's continuation
    warmup.finish("11", workers)
    warmup.announce_compiles()
    return found


@pytest.fixture(scope="session")
def checkpoint(checkpoints):
    """The default stand-in (synthetic)."""
    return checkpoints["synthetic"]


@pytest.fixture
def write_step(tmp_path):
    """Writes step source text to a file in a temporary folder; returns its path."""

    def write(source: str, name: str = "step_07.py") -> Path:
        path = tmp_path / name
        path.write_text(source)
        return path

    return write


# Set in this process by MAX's Mojo runtime once it loads; a child Python must not inherit them
# (PYTHONEXECUTABLE points at the system python3, which makes the child lose the venv).
_MOJO_ENV = ("PYTHONEXECUTABLE", "MOJO_PYTHON_LIBRARY", "PYTHONPATH")


def run_python(*args: str, cwd: Path = REPO, timeout: float = 900, env: dict | None = None):
    """`python -m ...` in a child process, as a learner would run it, on the synthetic checkpoint."""
    base = {k: v for k, v in os.environ.items() if k not in _MOJO_ENV}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd,
                          env={**base, "GPT2_WEIGHTS": "synthetic", **(env or {})}, timeout=timeout)


def solution_source(step: str) -> str:
    return (REPO / "solutions" / f"solution_{step}.py").read_text()


def mutate(source: str, old: str | tuple, new: str | tuple) -> str:
    """`source` with `old` replaced by `new` (or each of several in turn); each must occur exactly once."""
    if isinstance(old, tuple):
        for o, n in zip(old, new, strict=True):
            source = mutate(source, o, n)
        return source
    assert source.count(old) == 1, f"mutation target occurs {source.count(old)} times: {old!r}"
    return source.replace(old, new)


# step -> {mistake id: (caught, named)}, filled by tests/test_catalogue.py
MUTATION_RESULTS: dict[str, dict[str, tuple[bool, bool]]] = defaultdict(dict)


def pytest_terminal_summary(terminalreporter):
    """The mutation suite's table: per step, mistakes injected, caught (the check failed), named."""
    if not MUTATION_RESULTS:
        return
    write = terminalreporter.write_line
    terminalreporter.section("mistake catalogue: injected into the solutions")
    write("| step | mistakes | caught | named |")
    write("|---|---|---|---|")
    totals = [0, 0, 0]
    for step in sorted(MUTATION_RESULTS):
        results = MUTATION_RESULTS[step].values()
        row = [len(results), sum(c for c, _ in results), sum(n for _, n in results)]
        totals = [t + r for t, r in zip(totals, row)]
        write(f"| {step} | {row[0]} | {row[1]} | {row[2]} |")
    write(f"| all | {totals[0]} | {totals[1]} | {totals[2]} |")
