"""Step 12's references in numpy: the distribution a right sampler's draws follow, the scripted logits
the sampling parts use, and a greedy continuation picked another way (for the mistakes)."""

from __future__ import annotations

import numpy as np

from checker.references.reference import NEW_TOKENS

# MAX is imported inside the functions that use it: importing it takes seconds.

VOCAB = 50257
EOS = 50256  # GPT-2's <|endoftext|>
# The distribution part: CANDIDATES logits spaced SLOPE apart, in a fixed shuffled order,
# sampled DRAWS times at TEMPERATURE with TOP_K. There, ignoring the temperature or
# multiplying by it moves the distribution by a total variation of 0.42 and 0.63 (0.32
# between the two); a right sampler's draws stay within 0.009 of it (99.9% of seeds),
# under a tenth of TV_LIMIT.
CANDIDATES, SLOPE, TEMPERATURE, TOP_K, DRAWS, TV_LIMIT = 50, 0.5, 0.3, 10, 20_000, 0.1
SPREAD = -SLOPE * np.random.default_rng(12).permutation(CANDIDATES).astype(np.float64)
# The same logits far below 0, as float32 as a model's (GPT-2's lie around -100): divided by TEMPERATURE they
# are below -800, whose exp is 0 even in float64, so a softmax that does not subtract the largest first gets
# 0 / 0. Every distribution here is the same for both.
LOW = (SPREAD - 250.0).astype(np.float32)
# The top_k part: ten logits almost tied, the eleventh just below them (it would get ~9%).
NEAR_TIE = -np.concatenate([np.linspace(0.0, 0.09, TOP_K), 0.1 + 0.3 * np.arange(CANDIDATES - TOP_K)])
TOP_K_DRAWS = 2000
EOS_SCRIPT = [11, 12, EOS, 13, 14, 15, 16, 17]  # what greedy picks at each step of the eos part


def expected(logits: np.ndarray, temperature: float, top_k: int | None) -> np.ndarray:
    z = logits / temperature
    if top_k is not None:
        z = np.where(z < np.sort(z)[-top_k], -np.inf, z)
    p = np.exp(z - z.max())
    return p / p.sum()


def last_logits(model, ids: list[int]) -> np.ndarray:
    """The model's logits at the last position of `ids`, float64 [V]."""
    from max.experimental.tensor import Tensor

    return np.from_dlpack(model(Tensor.from_dlpack(np.array([ids], dtype=np.int64))))[0, -1].astype(np.float64)


def greedy_with(model, prompt: list[int], pick) -> list[int]:
    """A greedy continuation where `pick(logits [T, V], ids)` chooses each token: for named mistakes."""
    from max.experimental.tensor import Tensor

    ids, out = list(prompt), []
    for _ in range(NEW_TOKENS):
        logits = np.from_dlpack(model(Tensor.from_dlpack(np.array([ids], dtype=np.int64))))[0]
        ids.append(pick(logits, ids))
        out.append(ids[-1])
    return out


def softmax_over(z: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """softmax(z) over the ids in `keep` only."""
    p = np.zeros(len(z))
    p[keep] = np.exp(z[keep] - z[keep].max())
    return p / p.sum()
