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
from checker.reporting.compare import EXACT, Mistake
from checker.reporting.report import Report
from checker.harness.runner import StepRun
from checker.references.weights import Checkpoint
from checker.registry import Step, register
from checker.diagnosis.compiled import BATCH, HEADS, SEQ, Probe, wrapping

MASK_AXES = ("queries", "keys")
CASES = {  # part -> (sequence_length, num_tokens)
    "no cache": (6, 0),
    "with cache": (3, 4),
}


def mask(T: int, N: int, *, allowed=lambda q, k, N: k <= N + q, masked=-np.inf, kept=0.0, width=None):
    """A [T, width or N + T] mask with `kept` where allowed(query, key, N) and `masked` elsewhere."""
    q, k = np.indices((T, width or N + T))
    return np.where(allowed(q, k, N), kept, masked)


MISTAKES = [
    Mistake("mask-lower", "the past is masked instead of the future (lower triangle instead of upper)",
            "query i may see key j when j is not after i", lambda T, N: mask(T, N, allowed=lambda q, k, N: k >= N + q)),
    Mistake("mask-diagonal", "the diagonal is masked too: a token cannot see itself",
            "each token attends to itself and everything before it", lambda T, N: mask(T, N, allowed=lambda q, k, N: k < N + q)),
    Mistake("mask-none", "nothing is masked: every entry is 0",
            "entries after the allowed band must be -inf", lambda T, N: mask(T, N, allowed=lambda q, k, N: k >= 0)),
    Mistake("mask-inverted", "0 and -inf are swapped", "allowed entries are 0, masked ones -inf",
            lambda T, N: mask(T, N, masked=0.0, kept=-np.inf)),
    Mistake("mask-zero-one", "masked entries are 1 instead of -inf",
            "the mask is added to the scores: -inf makes softmax give 0", lambda T, N: mask(T, N, masked=1.0)),
    Mistake("mask-positive-inf", "masked entries are +inf instead of -inf",
            "adding +inf makes the masked score the largest", lambda T, N: mask(T, N, masked=np.inf)),
    Mistake("mask-ignores-cache", "the cached tokens were ignored: the band starts at column 0 (band_part with "
            "num_upper=0, as the online book's step 02 page has it, does this)",
            "with num_tokens cached keys, query i sees keys 0..num_tokens + i",
            lambda T, N: mask(T, N, allowed=lambda q, k, N: k <= q)),
    Mistake("mask-square", "the mask is [T, T]: the cached keys have no columns",
            "the mask needs one column per key: num_tokens + sequence_length",
            lambda T, N: mask(T, N, width=T)),
]


MASK_LOST = Mistake(
    "compiled-mask-lost",
    "the mask masks nothing (all 0) once compiled with a symbolic length, though it is right op by op: MAX 26.7 "
    "miscompiles an elementwise op between [T, 1] and [1, T] tensors (key <= query, built from arange) when "
    "its result is broadcast over more axes and T is symbolic (python -m checker.max_bugs shows it)",
    "build the mask without comparing a column of positions with a row of them: F.band_part on a "
    "[T, N + T] tensor of -inf does it in one op",
)


CATALOGUE = [*MISTAKES, MASK_LOST]


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
            name, lambda T=T, N=N: fn(T, N, dtype=DType.float32, device=CPU()), (), mask(T, N), MASK_AXES,
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
              lambda refs: np.broadcast_to(mask(MASK_SCORES[-1], 0), MASK_SCORES),
              ("sequences", "heads", "queries", "keys"), EXACT, lambda refs: [(MASK_LOST, np.zeros(MASK_SCORES))])


register(Step("02", check, CATALOGUE,
              reads=("causal_mask",), prepare=prepare, probe=PROBE, compiles_in_check=True))
