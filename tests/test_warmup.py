"""checker.warmup: the course's eager kernels, compiled together by the warm-up's workers, are loaded by a
process whatever it ran before, and they are all a check of the solutions needs: after the load, MAX
compiles nothing on the fly (each such compile costs 20-70 s on a machine's first check)."""

import json

import pytest

from tests.conftest import run_python

# Runs in a fresh process: MAX's per-op compile counted, optionally an eager op first, then the load, then
# every program of the warm-up or a check of a solution.
_DRIVER = """
import json, sys
import runtime
runtime.setup()
import numpy as np
from max._interpreter_ops import gc_compile
from checker import warmup

compiled = []
compile_one = gc_compile.compile_single_target
def counted(family, key, device, build):
    compiled.append(key)
    return compile_one(family, key, device, build)
gc_compile.compile_single_target = counted

if "--op-first" in sys.argv:
    from max.experimental import functional as F
    from max.experimental.tensor import Tensor
    np.from_dlpack(F.exp(Tensor.from_dlpack(np.ones((3, 3), dtype=np.float32))))
loaded = warmup.load("suite")
if "--check" in sys.argv:
    from checker.command import main
    status = main([sys.argv[-1], "--check-solution"])
else:
    status = 0
    for program in warmup._programs().values():
        program()
print(json.dumps({"loaded": loaded, "compiled": compiled, "status": status}))
"""


def _drive(*args: str) -> dict:
    done = run_python("-c", _DRIVER, *args, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # every program in fresh processes: ~50 s
def test_a_process_loads_the_kernels_whatever_it_ran_before_and_every_program_then_runs_uncompiled(checkpoints):
    run = _drive("--op-first")
    assert run["loaded"] >= 40, run
    assert run["compiled"] == ["unary_ExpOp_cpu_0_float32"], "compiled on the fly after the load: " + str(run)


def test_a_check_of_the_whole_model_compiles_nothing_after_the_load(checkpoints):
    """Step 10's check runs the whole model eagerly (and steps 03-09's checks first): every kernel it reaches
    is loaded. (Step 11's adds a compiled graph, minutes on a cold cache, and no eager kernel.)"""
    run = _drive("--check", "10")
    assert run["status"] == 0, run
    assert run["loaded"] >= 40 and run["compiled"] == [], "compiled on the fly during the check: " + str(run)
