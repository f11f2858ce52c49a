"""Step 16: the learner's 8-bit weights and int8 Mojo kernel, against numpy and Hugging Face.

Parts:

  earlier steps  the steps this file uses pass their own checks
  quantize       quantize(w) on quantize_cases (rows of random floats with K no multiple of BLOCK, a
                 row of zeros, and the checkpoint's own weights of each product): q exactly as
                 runtime.quantize (a tie that float rounding may tip either way allowed
                 +-1), scales to float32 rounding
  dequantize     dequantize(q, scales) of the reference's q and scales, to float32 rounding
  quality        what quantisation costs, from the learner's quantize and dequantize: transformers
                 float32 against transformers on their dequantised weights over the course's text;
                 mean KL divergence and top-1 agreement of the next-token distributions, perplexity;
                 KL at most QUALITY_BOUND times the reference quantiser's
  kernel         once the parts above pass: matvec_q8 (their Mojo, in a child process) on step 15's
                 shapes, w quantised by the reference: against numpy's x @ dequantize(q, scales).T + b
  decode         GPT2Quantized, two steps op by op and then compiled for one position (step 15's
                 decode_part), the learner's model loaded with the dequantised weights (the prompt
                 through their step 13 graph on the same numbers):
                 each decode step's logits against transformers loaded with the dequantised weights,
                 greedy ids equal, the kernel called for every product (4 per block and the head)
  timing         a report, not a verdict: decode tokens/s with the int8 kernel and with MAX's float32
                 products (step 13's graph) in the same run, bytes read per token, the bandwidth share

A mistake is named only when the learner's outputs equal what it computes on every case (MISTAKES,
KERNEL_MISTAKES).
"""

from __future__ import annotations

from pathlib import Path

from checker.harness.deps import used_modules
from checker.harness.runner import StepRun
from checker.reporting.compare import DECODE
from checker.reporting.report import FAIL, PASS, TODO, Part, Report
from checker.steps.step15.decode import NEW_TOKENS, decode_part
from checker.steps.step15.reference import kernel_cases
from checker.steps.step16.decode import INT8, quality_part, timing_part
from checker.steps.step16.kernel import int8_kernel_part
from checker.steps.step16.quantize import (
    dequantize_part,
    quantize_cases,
    quantize_part,
)
from runtime.checkpoints import Checkpoint
from runtime.quantize import BLOCK

FUNCTIONS = ("quantize", "dequantize", "matvec_q8", "QuantizedLinear", "GPT2Quantized")
PARTS = ["earlier steps", "quantize", "dequantize", "quality", "kernel", "decode", "timing"]


def check(path: Path, checkpoint: Checkpoint, *, timeout: float = 300.0) -> Report:
    config = checkpoint.learner_config()
    run = StepRun("16", "8-bit weights and your int8 kernel in decode", path, checkpoint,
                  f"quantize on {BLOCK}-column blocks (rows with K no multiple of {BLOCK}, the checkpoint's own "
                  f"weights); {len(kernel_cases(config))} int8 matvec shapes; {NEW_TOKENS} greedy "
                  f"ids ({NEW_TOKENS - 1} decode steps after the prompt's pass) on dequantised weights, logits "
                  f"{DECODE}", PARTS, timeout=timeout)
    if (opened := run.import_functions(FUNCTIONS, checkpoint)) is None:
        return run.finish("needs " + ", ".join(FUNCTIONS))
    step, fns = opened
    cases = quantize_cases(checkpoint)
    written = [quantize_part(run, fns["quantize"], cases), dequantize_part(run, fns["dequantize"], cases)]
    if any(p.status == TODO for p in written):
        return run.finish("runs once quantize and dequantize are written")
    quality_part(run, fns["quantize"], fns["dequantize"], checkpoint)  # what a broken quantiser costs, too
    if any(p.status != PASS for p in run.report.parts):
        return run.finish("runs once quantize, dequantize and quality pass")
    if int8_kernel_part(run, path, config).status != PASS:
        return run.finish("runs once the kernel passes")
    used = used_modules(step)
    if "11" not in used or "13" not in used:
        run.add(Part("decode", FAIL, "step 16 builds on your steps 11 and 13: import GPT2LMHeadModel and "
                     "load_hf_weights from steps.step_11, GPT2WithCache from steps.step_13"))
    elif (graphs := decode_part(run, step, used, checkpoint, INT8)) is not None:
        run.add(timing_part(*graphs, config))
    return run.finish("runs once decode passes")


