"""Step 17: the learner's FlashAttention kernel and the GPT-2 around it, against numpy and Hugging Face.

Parts:

  earlier steps  the steps this file uses pass their own checks
  kernel         the learner's flash_attention (their Mojo, in a child process: checker.running.mojo) on
                 kernel_cases, five runs each, against numpy in float64; the caches it leaves (the new keys
                 and values at P .. P+T-1, nothing else touched)
  model          GPT2Flash op by op, then compiled, its caches written in place: the last logits of a prompt
                 of the whole context, a short prompt's decode steps, the greedy ids, against Hugging Face
  generate       generate_flash on the compiled model: transformers' greedy ids, a stop at eos
  int8           optional, once step 16 passes: a prompt through GPT2Flash, each decode step through
                 GPT2FlashQ8 (step 16's int8 products) on the same caches, against transformers on the same
                 dequantised weights
  timing         a report, not a verdict: the kernel against step 13's attention and torch's, at a prefill of
                 the whole context and a decode step after it, and the share of the bandwidth it reaches

A mistake is named only when the learner's output and caches equal what it computes on every case (see
checker.steps.step17.mistakes).
"""

from __future__ import annotations

from pathlib import Path

from checker.harness.deps import used_modules
from checker.harness.runner import StepRun
from checker.reporting.compare import DECODE
from checker.reporting.report import FAIL, PASS, Part, Report
from checker.running.mojo import REPEATS
from checker.steps.step15.decode import NEW_TOKENS
from checker.steps.step17.kernel import kernel_part
from checker.steps.step17.model import cache_dtype, generate_part, int8_part, model_part
from checker.steps.step17.reference import KERNEL, kernel_cases
from checker.steps.step17.timing import timing_part
from runtime.checkpoints import Checkpoint
from runtime.learner import LearnerError

FUNCTIONS = ("flash_attention", "empty_flash_cache", "GPT2Flash", "generate_flash")
PARTS = ["earlier steps", "kernel", "model", "generate", "int8", "timing"]


def check(path: Path, checkpoint: Checkpoint, *, timeout: float = 300.0) -> Report:
    config = checkpoint.learner_config()
    run = StepRun("17", "your FlashAttention kernel in GPT-2", path, checkpoint,
                  f"{len(kernel_cases())} attention cases, {REPEATS} runs each, {KERNEL}; then a prompt of "
                  f"{config.n_positions} positions and {NEW_TOKENS} greedy ids ({NEW_TOKENS - 1} decode steps "
                  f"after the prompt's pass), logits {DECODE}", PARTS, timeout=timeout)
    if (opened := run.import_functions(FUNCTIONS, checkpoint)) is None:
        return run.finish("needs " + ", ".join(FUNCTIONS))
    step, _ = opened
    dtype = cache_dtype(run, step, config)  # the learner's caches' dtype: the kernel is run on caches of it
    if kernel_part(run, path, dtype).status != PASS:
        return run.finish("runs once the kernel passes")
    eleven = used_modules(step).get("11")
    if eleven is None:
        run.add(Part("model", FAIL, "step 17 builds on your step 11: import GPT2LMHeadModel and load_hf_weights from "
                     "steps.step_11"))
        return run.finish("runs once the model passes")
    compiled = model_part(run, step, eleven, checkpoint, dtype)
    if compiled is None:
        return run.finish("runs once the model passes")
    if generate_part(run, step, compiled, checkpoint, dtype).status == PASS:
        int8_part(run, step, eleven, path, checkpoint, dtype)
        try:
            run.add(run.call(timing_part, step, config, dtype))
        except LearnerError as e:
            run.add(Part("timing", PASS, f"a report, not a verdict: not measured ({e})"))
    return run.finish("runs once the model and generate pass")
