"""Step 02's catalogue: masks a learner may build instead of GPT-2's, each as numpy computes it for
(sequence_length T, num_tokens N), and the edit that makes it in the solution."""

from __future__ import annotations

import numpy as np

from checker.references.attention_np import causal_mask as mask_np
from checker.reporting.compare import Edit, Mistake

# The solution's mask, and a learner's other way to write it: key positions compared with query positions.
BAND = "return F.band_part(mask, num_lower=None, num_upper=num_tokens, exclude=True)"
COMPARED = ("q = Tensor.arange(0, sequence_length, dtype=DType.int64, device=device).reshape([-1, 1])\n"
            "    k = Tensor.arange(0, total, dtype=DType.int64, device=device).reshape([1, -1])\n"
            "    return F.where({allowed}, F.broadcast_to(Tensor(0.0, dtype=dtype, device=device), "
            "[sequence_length, total]), mask)")
MINUS_INF = 'Tensor(float("-inf"),'

MISTAKES = [
    Mistake("mask-lower", "the past is masked instead of the future (lower triangle instead of upper)",
            "query i may see key j when j is not after i",
            lambda T, N: mask_np(T, N, allowed=lambda q, k, N: k >= N + q),
            Edit(BAND, BAND.replace("num_lower=None, num_upper=num_tokens", "num_lower=0, num_upper=None"))),
    Mistake("mask-diagonal", "the diagonal is masked too: a token cannot see itself",
            "each token attends to itself and everything before it",
            lambda T, N: mask_np(T, N, allowed=lambda q, k, N: k < N + q),
            Edit(BAND, COMPARED.format(allowed="k < q + num_tokens"))),
    Mistake("mask-none", "nothing is masked: every entry is 0", "entries after the allowed band must be -inf",
            lambda T, N: mask_np(T, N, allowed=lambda q, k, N: k >= 0),
            Edit(BAND, BAND.replace("num_upper=num_tokens", "num_upper=None"))),
    Mistake("mask-inverted", "0 and -inf are swapped", "allowed entries are 0, masked ones -inf",
            lambda T, N: mask_np(T, N, masked=0.0, kept=-np.inf),
            Edit(BAND, BAND.replace("exclude=True", "exclude=False"))),
    Mistake("mask-zero-one", "masked entries are 1 instead of -inf",
            "the mask is added to the scores: -inf makes softmax give 0", lambda T, N: mask_np(T, N, masked=1.0),
            Edit(MINUS_INF, "Tensor(1.0,")),
    Mistake("mask-positive-inf", "masked entries are +inf instead of -inf",
            "adding +inf makes the masked score the largest", lambda T, N: mask_np(T, N, masked=np.inf),
            Edit(MINUS_INF, 'Tensor(float("inf"),')),
    Mistake("mask-ignores-cache", "the cached tokens were ignored: the band starts at column 0 (band_part with "
            "num_upper=0, as the online book's step 02 page has it, does this)",
            "with num_tokens cached keys, query i sees keys 0..num_tokens + i",
            lambda T, N: mask_np(T, N, allowed=lambda q, k, N: k <= q),
            Edit(BAND, BAND.replace("num_upper=num_tokens", "num_upper=0"))),
    Mistake("mask-square", "the mask is [T, T]: the cached keys have no columns",
            "the mask needs one column per key: num_tokens + sequence_length",
            lambda T, N: mask_np(T, N, width=T),
            Edit(("total = Dim(sequence_length) + num_tokens", BAND),
                 ("total = Dim(sequence_length)", BAND.replace("num_upper=num_tokens", "num_upper=0")))),
]

# Right op by op: key and query positions from arange, compared with <= (MAX 26.7 miscompiles it).
MASK_LOST = Mistake(
    "compiled-mask-lost",
    "the mask masks nothing (all 0) once compiled with a symbolic length, though it is right op by op: MAX 26.7 "
    "miscompiles an elementwise op between [T, 1] and [1, T] tensors (key <= query, built from arange) when "
    "its result is broadcast over more axes and T is symbolic (python -m checker.max_bugs shows it)",
    "build the mask without comparing a column of positions with a row of them: F.band_part on a "
    "[T, N + T] tensor of -inf does it in one op",
    edit=Edit(BAND, COMPARED.format(allowed="k <= q + num_tokens")))

CATALOGUE = [*MISTAKES, MASK_LOST]
