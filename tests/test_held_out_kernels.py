"""The kernels' held-out mistakes (tests/held_out_kernels.py): each made in a copy of the solution, in its
Python or in its kernel's Mojo, and checked as a learner's file kept elsewhere is checked (step 18's without
its server, as the suite runs it). The check must fail, place the fault (a cause word in a failing line that
does not call it right) and mislead nowhere (tests/test_unseen.py's judgement). Heavy: a Mojo kernel built for
each (20-60 s on 2 cores), a model run for each mistake in the Python (1-3 min). The table at the end counts
them per step."""

import shutil

import pytest

from bench.machine import VECTOR_FLAGS, cpu
from checker import registry
from runtime.paths import REPO
from tests.conftest import mutate, solution_source
from tests.held_out_kernels import HELD, Held
from tests.test_unseen import judge_parts


def _write(folder, h: Held):
    """The solution of h.step in `folder`, its kernel beside it (and step 16's, for step 17), with h made; the
    step file's path."""
    kernel = folder / f"solution_{h.step}_kernel"
    shutil.copytree(REPO / "solutions" / kernel.name, kernel)
    source = solution_source(h.step)
    if h.file == "py":
        source = mutate(source, h.old, h.new)
    else:
        (kernel / h.file).write_text(mutate((kernel / h.file).read_text(), h.old, h.new))
    path = folder / f"solution_{h.step}.py"
    path.write_text(source)
    if h.step == "17":  # step 16 beside it, as a learner's, for the int8 part (GPT2FlashQ8)
        shutil.copy(REPO / "solutions" / "solution_16.py", folder)
        shutil.copytree(REPO / "solutions" / "solution_16_kernel", folder / "solution_16_kernel")
    return path


def test_each_applies_once_is_new_and_says_its_piece():
    names = [(h.step, h.name) for h in HELD]
    assert len(names) == len(set(names)) and len(HELD) >= 30
    for h in HELD:
        kernel = f"solution_{h.step}_kernel/{h.file}"
        source = (REPO / "solutions" / (f"solution_{h.step}.py" if h.file == "py" else kernel)).read_text()
        assert mutate(source, h.old, h.new) != source, h.name
        assert h.cause and all(h.cause) and h.piece and h.expect, h.name
        assert not h.needs or h.needs in VECTOR_FLAGS, h.name
        catalogue = registry.step(h.step).catalogue
        assert h.name not in {c.id for c in catalogue}, f"{h.step} {h.name} is a catalogued mistake's id"
        assert (h.old, h.new) not in {(c.edit.old, c.edit.new) for c in catalogue if c.edit}, h.name
    for step in ("15", "16", "17", "18"):
        assert sum(h.step == step for h in HELD) >= 10, step


@pytest.mark.heavy
@pytest.mark.parametrize("h", HELD, ids=[f"{h.step}-{h.name}" for h in HELD])
def test_held_out_kernel_mistake_is_placed(checkpoint, step_folder, record_property, h):
    if h.needs and h.needs not in cpu()[1]:
        pytest.skip(f"{h.name} computes what the solution does on a CPU without {h.needs}")
    report = registry.step(h.step).check(_write(step_folder, h), checkpoint)
    j = judge_parts(report.parts, h.step, h.cause)
    record_property("held_out_kernels", [h.step, h.name, j.failed, j.all_right, j.placed, j.misleading])
    assert j.failed, f"the check passed a copy of the solution with {h.name} made"
    verdict = (f"{h.step} {h.name}: cause {' | '.join(h.cause)} ({h.piece}); placed {j.placed}, misleading "
               f"{j.misleading}; the failing parts say:\n" + "\n".join(f"    {line}" for line in j.lines))
    assert j.placed and not j.misleading, verdict
    assert "Traceback" not in report.render()
