"""Step 02: the learner's causal_mask against the exact mask GPT-2 applies.

Row i (a query) may attend to column j (a key) when j <= num_tokens + i: the
`num_tokens` cached keys come first, then the new tokens. Allowed entries are
0, masked ones -inf, and the values are compared exactly: op by op, then
compiled with a symbolic length and added to [B, H, T, T] scores, as the
attention of `pixi run gpt2`'s compiled model uses it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from checker.diagnosis import localise
from checker.diagnosis.compiled import Probe, wrapping
from checker.harness.runner import StepRun
from checker.references.attention_np import causal_mask as mask_np
from checker.reporting.compare import EXACT
from checker.reporting.report import Report
from checker.steps.step02.mistakes import MASK_LOST, MISTAKES
from runtime.checkpoints import Checkpoint
from runtime.compiling import BATCH, HEADS, SEQ

# MAX is imported inside the functions that use it: importing it takes seconds.

MASK_AXES = ("queries", "keys")
CASES = {  # part -> (sequence_length, num_tokens)
    "no cache": (6, 0),
    "with cache": (3, 4),
}




def prepare(checkpoint: Checkpoint) -> None:
    """Nothing to compute: the reference is exact."""


def check(path: Path, checkpoint: Checkpoint, *, timeout: float = 300.0) -> Report:
    from max.driver import CPU
    from max.dtype import DType

    cases = ", ".join(f"{n} (sequence_length={t}, num_tokens={c})" for n, (t, c) in CASES.items())
    run = StepRun("02", "causal_mask", path, checkpoint, f"{cases}; float32, exact values; then compiled, added "
                  "to [B, H, T, T] scores", [*CASES, "compiled"], timeout=timeout)
    step = run.import_step()
    fn = step and run.need(step, "causal_mask")
    if fn is None:
        return run.finish("needs causal_mask")
    for name, (T, N) in CASES.items():
        run.run_part(
            name, lambda T=T, N=N: fn(T, N, dtype=DType.float32, device=CPU()), (), mask_np(T, N), MASK_AXES,
            MISTAKES, (T, N), what="causal_mask", tol=EXACT, localise=lambda got, T=T, N=N: localise.mask(got, T, N),
        )
    run.compiled_part(step, checkpoint, {})
    return run.finish("runs once the parts above pass")


# --- its piece compiled alone (checker.diagnosis.compiled) ------------------------------------------

MASK_SCORES = (2, 3, 6, 6)  # [B, H, T, T] zero scores: the output is the mask, broadcast


def _probe_module(step, checkpoint, run):
    causal_mask = step.causal_mask

    def forward(self, scores):  # [B, H, T, T] + [T, T]: the mask as attention uses it
        return scores + causal_mask(scores.shape[-1], 0, dtype=scores.dtype, device=scores.device)

    return wrapping(forward)


PROBE = Probe("02", "causal_mask", _probe_module,
              lambda refs: [(np.zeros(MASK_SCORES, np.float32), (BATCH, HEADS, SEQ, SEQ))],
              lambda refs: np.broadcast_to(mask_np(MASK_SCORES[-1], 0), MASK_SCORES),
              ("sequences", "heads", "queries", "keys"), EXACT, lambda refs: [(MASK_LOST, np.zeros(MASK_SCORES))])
