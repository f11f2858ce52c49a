"""Shared fixtures: the synthetic checkpoint, warm kernels, and a way to check a copy of a step.

The suite always uses the synthetic checkpoint (GPT2_WEIGHTS=synthetic), so
its results do not depend on what a machine has downloaded.
"""

import os
from pathlib import Path

import pytest

os.environ["GPT2_WEIGHTS"] = "synthetic"

from checker import warmup  # noqa: E402
from checker.paths import REPO  # noqa: E402
from checker.weights import find_checkpoint  # noqa: E402


@pytest.fixture(scope="session")
def checkpoint():
    workers = warmup.start("11")  # compiles the kernels of every step while the references are computed
    ckpt = find_checkpoint(synthetic=True)
    from checker.registry import prepare

    prepare("12", ckpt)  # the activations every step uses, and step 12's continuation
    warmup.finish("11", workers)
    warmup.announce_compiles()
    return ckpt


@pytest.fixture
def write_step(tmp_path):
    """Writes step source text to a file in a temporary folder; returns its path."""

    def write(source: str, name: str = "step_07.py") -> Path:
        path = tmp_path / name
        path.write_text(source)
        return path

    return write


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
