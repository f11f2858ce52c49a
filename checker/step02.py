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

from checker import localise
from checker.compare import EXACT, Mistake
from checker.compiled import MASK_LOST
from checker.report import Report
from checker.runner import StepRun
from checker.weights import Checkpoint

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
