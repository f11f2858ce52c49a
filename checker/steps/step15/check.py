"""Step 15: the learner's Mojo kernel for decode's weight products, against numpy and Hugging Face.

Parts:

  earlier steps  the steps this file uses pass their own checks
  kernel         the learner's matvec (their Mojo, in a child process: checker.running.mojo) on KERNEL_CASES:
                 shapes whose K and M are no multiple of a vector width or of a task's rows, more than
                 one row of x, and each of GPT-2's products (c_attn, attn.c_proj, c_fc, mlp.c_proj, the
                 head) at one position, each run REPEATS times; against numpy in float64
  decode         GPT2WithKernel compiled for one position (input_ids [B, 1]), after the prompt ran
                 through the learner's step 13 model: each decode step's logits against Hugging Face at
                 the same position, the greedy ids against transformers' generate, and the kernel
                 called for every product of a decode step (4 per block and the head)
  timing         a report, not a verdict: decode tokens/s with the kernel and with MAX's products
                 (step 13's graph) in the same run, the weight bytes each reads per second, and the
                 machine's read bandwidth measured now (the limit)

A mistake is named only when the learner's output equals what it computes on every case (see
MISTAKES), or, for a race, when the same input gave different outputs.
"""

from __future__ import annotations

from pathlib import Path

from checker.harness.deps import used_modules
from checker.harness.runner import StepRun
from checker.reporting.compare import DECODE
from checker.reporting.report import FAIL, PASS, Part, Report
from checker.running.mojo import REPEATS, SEED, case_arrays
from checker.steps.step15.decode import NEW_TOKENS, decode_part, timing_part
from checker.steps.step15.judge import judge_kernel, kernel_part, named_mistake
from checker.steps.step15.reference import KERNEL, kernel_cases
from runtime.checkpoints import Checkpoint

FUNCTIONS = ("matvec", "KernelLinear", "GPT2WithKernel")
PARTS = ["earlier steps", "kernel", "decode", "timing"]
# --- the check ------------------------------------------------------------------------------------


def check(path: Path, checkpoint: Checkpoint, *, timeout: float = 300.0) -> Report:
    config = checkpoint.learner_config()
    run = StepRun("15", "your Mojo kernel in decode", path, checkpoint,
                  f"{len(kernel_cases(config))} matvec shapes (remainders, then GPT-2's products), {REPEATS} runs "
                  f"each, {KERNEL}; then {NEW_TOKENS} greedy ids ({NEW_TOKENS - 1} decode steps after the "
                  f"prompt's pass), logits {DECODE}", PARTS, timeout=timeout)
    if (opened := run.import_functions(FUNCTIONS, checkpoint)) is None:
        return run.finish("needs " + ", ".join(FUNCTIONS))
    step, fns = opened
    kernel = _kernel_part(run, path, config)
    if kernel.status != PASS:
        return run.finish("runs once the kernel passes")
    used = used_modules(step)
    if "11" not in used or "13" not in used:
        run.add(Part("decode", FAIL, "step 15 builds on your steps 11 and 13: import GPT2LMHeadModel and "
                     "load_hf_weights from steps.step_11, GPT2WithCache from steps.step_13"))
        return run.finish("runs once decode passes")
    graphs = decode_part(run, step, used, checkpoint)
    if graphs is not None:
        run.add(timing_part(*graphs, config))
    return run.finish("runs once decode passes")


def _kernel_part(run: StepRun, path: Path, config) -> Part:
    cases = kernel_cases(config)
    arrays = {name: case_arrays(n, k, m, bias, SEED) for name, n, k, m, bias in cases}  # drawn once, as the child drew
    return kernel_part(run, path, cases, lambda ran, results: judge_kernel(ran, results, arrays, named_mistake))


