"""Verdicts that hold where the learner's model really runs: compiled, as `pixi run gpt2` runs it.

Each case is a learner's finished set of step files (a clone of the course
whose steps/ hold the solutions, importing each other) with one fault that
only compilation shows: every op-by-op check of the faulty step passes, yet
the compiled model is wrong or cannot be built. The checks must name the step,
and so must `gpt2 --compare`. Plus the minimal reproduction of the MAX fault.
"""

import re

import pytest

from checker.harness import verdicts
from runtime.paths import finished_step
from tests.conftest import mutate, run_python

# step -> (text of its finished file, what replaces it, what the fault is)
FAULTS = {
    "02": (  # the mask from arange and <=, right op by op; MAX 26.7 miscompiles it
        "    return F.band_part(mask, num_lower=None, num_upper=num_tokens, exclude=True)",
        "    q = Tensor.arange(0, sequence_length, dtype=DType.int64, device=device).reshape([-1, 1])\n"
        "    k = Tensor.arange(0, total, dtype=DType.int64, device=device).reshape([1, -1])\n"
        "    return F.where(k <= q + num_tokens, Tensor(0.0, dtype=dtype, device=device), mask)",
        "wrong numbers",
    ),
    "07": (  # the same pattern written inside the attention instead of calling causal_mask
        "        mask = causal_mask(seq_len, 0, dtype=query.dtype, device=query.device)  # [T, T]",
        "        positions = Tensor.arange(0, seq_len, dtype=DType.int64, device=query.device)\n"
        "        mask = F.where(positions.reshape([1, -1]) <= positions.reshape([-1, 1]),\n"
        "                       Tensor(0.0, dtype=query.dtype, device=query.device),\n"
        "                       Tensor(float('-inf'), dtype=query.dtype, device=query.device))",
        "wrong numbers",
    ),
    "06": (  # the positions made with numpy from a Python int of the length
        "        positions = Tensor.arange(past_length, past_length + seq_len, dtype=DType.int64, "
        "device=self.weight.device)",
        "        positions = Tensor.from_dlpack(np.arange(past_length, past_length + int(seq_len)))",
        "cannot compile",
    ),
    "10": (  # the length as a Python int
        "        seq_len = input_ids.shape[-1]",
        "        seq_len = int(input_ids.shape[-1])",
        "cannot compile",
    ),
}
IMPORTS = {"07": ("import math\n", "import math\n\nfrom max.dtype import DType\n"),
           "06": ("from max.dtype import DType\n", "import numpy as np\nfrom max.dtype import DType\n")}


def _with_fault(repo, step: str) -> None:
    old, new, _ = FAULTS[step]
    source = mutate(finished_step(step), old, new)
    if step in IMPORTS:
        source = mutate(source, *IMPORTS[step])
    (repo / "steps" / f"step_{step}.py").write_text(source)


def _check(repo, step: str):
    return run_python("-m", "checker", step, cwd=repo, timeout=1200)


@pytest.mark.parametrize("step", FAULTS)
def test_compile_only_fault_is_named_by_the_checks_and_by_gpt2(checkpoint, learner_repo, step):
    _with_fault(learner_repo, step)
    own = _check(learner_repo, step)
    if step in ("02", "07"):  # their own check compiles their piece
        assert own.returncode == 1, own.stdout
        assert re.search(r"FAIL  compiled\s", own.stdout), own.stdout
        assert "what changes is how MAX compiles it" in own.stdout or "cannot be compiled" in own.stdout
    else:  # op by op the step is right
        assert own.returncode == 0, own.stdout + own.stderr

    model = _check(learner_repo, "11")
    assert model.returncode == 1, model.stdout
    if step in ("02", "07"):  # step 11 reads their verdicts first
        assert f"{step} FAILS" in model.stdout and f"fix step {step} first" in model.stdout, model.stdout
        if step == "02":  # step 09 (right op by op), checked inside step 11's check, is judged as s09 judges it
            nine = verdicts.lookup("09", learner_repo / "steps" / "step_09.py", checkpoint)
            assert nine and not nine["ok"] and ["earlier steps", "FAIL"] in nine["parts"], nine
    else:
        compiled = model.stdout.split("FAIL  compiled", 1)[1]
        assert "cannot be compiled with a symbolic batch and length" in compiled, model.stdout
        assert f"look at step {step}: pixi run s{step}" in compiled, model.stdout

    gpt2 = run_python("-m", "gpt2", "The cat sat on the mat", "--compare", "--max-new-tokens", "6",
                      cwd=learner_repo, timeout=1200)
    assert gpt2.returncode == 1, gpt2.stdout + gpt2.stderr
    said = gpt2.stdout + gpt2.stderr
    assert f"look at step {step}: pixi run s{step}" in said, said
    assert "Traceback" not in said
    if FAULTS[step][2] == "wrong numbers":
        assert "Token ids differ from position" in said and "transformers: The cat sat on the mat<" in said


def test_compiled_parts_pass_for_the_finished_steps(checkpoint, learner_repo):
    """The same clone with no fault: step 11 compiles the learner's model and passes."""
    model = _check(learner_repo, "11")
    assert model.returncode == 0, model.stdout + model.stderr
    assert re.search(r"PASS  compiled\s+2 x 10 tokens and 1 x 6 tokens, symbolic batch and length", model.stdout)


def test_minimal_reproduction_of_the_max_fault(checkpoint):
    """checker.max_bugs reproduces it with plain max.graph (exit 1 while MAX 26.7 has it); if this fails, MAX
    fixed it: the catalogue's compiled-mask-lost and the troubleshooting page's row about it can go."""
    done = run_python("-m", "checker.max_bugs")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "T fixed   : row 1 = [-101.0, -91.0, -81.0, -71.0]  right" in done.stdout
    assert "T symbolic: row 1 = [-100.0, -100.0, -100.0, -100.0]  WRONG" in done.stdout
