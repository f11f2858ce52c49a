"""Step 16's kernel part: the learner's int8 Mojo kernel in a child process on step 15's shapes, judged as
step 15 judges its kernel (checker.steps.judge), against x @ dequantize(q, scales).T + b."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from checker.harness.runner import StepRun
from checker.reporting.compare import compare
from checker.reporting.report import Part
from checker.running.mojo import SEED, case_arrays, kernel_args
from checker.steps.step15.judge import Tail, judge_kernel, kernel_part
from checker.steps.step15.reference import KERNEL, kernel_cases
from checker.steps.step16.mistakes import BIAS_MISSING, BIAS_TWICE, KERNEL_MISTAKES
from runtime import quantize as ref
from runtime.quantize import BLOCK


def kernel_verdict(cases, results: dict, packed: dict) -> Part:
    """The kernel part of `results` on `cases`, each case's {name: (x, q, scales, b)} in `packed`: against
    x @ dequantize(q, scales).T + b, a mistake named when its outputs equal the learner's on every case."""
    def named(results, arrays):
        for mistake, computes in KERNEL_MISTAKES:
            if any(all(compare(results[name][0].astype(np.float64), compute(*packed[name]), axes=("row", "output"),
                               mistakes=[], tol=KERNEL).ok for name in arrays)
                   for compute in computes):
                return mistake
        return None

    arrays = {name: (x, ref.dequantize(q, s), b) for name, (x, q, s, b) in packed.items()}
    return judge_kernel(cases, results, arrays, named, tail=TAIL, outside=OUTSIDE,
                        known={0: BIAS_MISSING, 2: BIAS_TWICE}, packed=packed)


TAIL = Tail((BLOCK,), str(BLOCK), f"each row's last, partial block: its K % {BLOCK} columns, or the scale "
                   "they are multiplied by", "block",
            f"the loop over a row's whole blocks of {BLOCK} (each block's vectors, "
                   "its scale, the sum over blocks); a shape whose K is below one block runs its partial block alone")
OUTSIDE = (f"an index one row or one block too far, or one before the start: a loop that runs once more than it "
           f"should, the scale of a last block read where K is a multiple of {BLOCK} and there is none, a scale at "
           "index -1")


def int8_kernel_part(run: StepRun, path: Path, config) -> Part:
    cases = kernel_cases(config)
    packed = {}
    for name, n, k, m, bias in cases:
        x, q, s, *b = kernel_args("matvec_q8", *case_arrays(n, k, m, bias, SEED))  # as the child makes them
        packed[name] = (x, q, s, b[0] if b else None)
    return kernel_part(run, path, cases, lambda ran, results: kernel_verdict(ran, results, packed),
                       function="matvec_q8", source="matvec_q8.mojo")
