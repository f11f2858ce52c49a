"""Step 18: the learner's paged FlashAttention and batched int8 products, and the GPT-2 they serve to many users.

Parts:

  earlier steps  the steps this file uses pass their own checks
  attention      the learner's paged_flash_attention (their Mojo, in a child process, inside a graph built around
                 each case's own pool: checker.running.paged_graph) on ragged paged batches, five runs each,
                 against numpy in float64: every row's output, and the pool it leaves (the new keys and values at
                 their positions, nothing else touched: not another layer, not a shared prefix's pages)
  products       matmul_q8 on M = 1 .. 64 rows of GPT-2's shapes, against x @ dequantize(q, scales).T + b; a kernel
                 whose every product equals (to float32's noise) the product with x and w rounded one way of
                 ROUNDINGS (bfloat16, int8 per block of 32) passes, and the server is held to that rounding
  paged model    GPT2PagedQ8 (2 blocks) compiled as max serve compiles it, on MAX's paged cache through step 14's
                 batches of prompts and decodes, against transformers on the same dequantised weights to float32's
                 tolerance (a rounding matmul_q8 swapped for the same product in float32 while it runs:
                 checker.steps.step18.model); a model off while the kernels pass is placed at the first piece of its
                 stream that differs
  served         GPT2PagedQ8 under a real `max serve` on 127.0.0.1 (`pixi run serve --fast`): 16 concurrent
                 requests of different lengths, each transformers' greedy ids on the same dequantised weights (a
                 rounding kernel's: up to ties float32's noise decides, measured), then step 14's serving checks
                 (streaming, echo with logprobs, refusals) against that model;
                 and a timing report, never a verdict: one request's tokens/s beside 16 at once

A mistake is named only when the learner's output and pool equal what it computes on every case (see
checker.steps.step18.mistakes); otherwise what the off rows share is said (checker.steps.step18.reading).
"""

from __future__ import annotations

from pathlib import Path

from checker.harness.deps import used_modules
from checker.harness.runner import StepRun
from checker.reporting.report import FAIL, PASS, Part, Report
from checker.running.mojo import REPEATS
from checker.steps.step14.check import serving_enabled
from checker.steps.step18.kernel import attention_part, products_part
from checker.steps.step18.model import model_part
from checker.steps.step18.reference import KERNEL, kernel_cases, product_cases
from checker.steps.step18.served import CONCURRENT, fast_served_part
from runtime.checkpoints import Checkpoint

FUNCTIONS = ("paged_flash_attention", "matmul_q8", "GPT2PagedQ8")
PARTS = ["earlier steps", "attention", "products", "paged model", "served"]


def check(path: Path, checkpoint: Checkpoint, *, timeout: float = 300.0) -> Report:
    serve = serving_enabled()
    run = StepRun("18", "serving many users on your own kernels", path, checkpoint,
                  f"{len(kernel_cases())} ragged paged batches and {len(product_cases())} int8 products, {REPEATS} "
                  f"runs each, {KERNEL}" + (f"; then a real max serve, {CONCURRENT} requests at once" if serve else
                                            "; no server (GPT2_CHECK_SERVE=0)"),
                  PARTS if serve else PARTS[:-1], timeout=timeout)
    if (opened := run.import_functions(FUNCTIONS, checkpoint)) is None:
        return run.finish("needs " + ", ".join(FUNCTIONS))
    step, fns = opened
    attention_part(run, path)
    rounding = products_part(run, path)
    if not all(p.status == PASS for p in run.report.parts):
        return run.finish("runs once the kernels pass")
    eleven = used_modules(step).get("11")
    if eleven is None:
        run.add(Part("paged model", FAIL, "step 18 wraps your step 11 model: import GPT2LMHeadModel and "
                     "load_hf_weights from steps.step_11"))
        return run.finish("needs your step 11 model")
    if model_part(run, fns["GPT2PagedQ8"], eleven, checkpoint, rounding).status == PASS and serve:
        run.add(fast_served_part(path, checkpoint, rounding))
    return run.finish("runs once the model passes")
