"""Step 15's references: the shapes the learner's kernel runs on, and what it must compute, in float64.

    kernel_cases(config)   (name, N, K, M, bias) for x [N, K], w [M, K], b [M]
    expected(x, w, b)      x @ w.T + b, [N, M]
"""

from __future__ import annotations

import numpy as np

from checker.reporting.compare import Tolerance

# float32 sums of up to 3072 products against float64: the solution stays under 0.1 of this on every
# case (tests/test_step15.py holds it under CORRECT_MARGIN); a dropped term of a sum is 10-1000x over.
KERNEL = Tolerance(2e-5)
WIDTHS = (4, 8, 16, 32, 64)  # vector widths a learner may choose: the tail they leave depends on it


def shape_name(n: int, k: int, m: int) -> str:
    return f"x [{n}, {k}] w [{m}, {k}]"


def kernel_cases(config) -> list[tuple[str, int, int, int, bool]]:
    """(name, N, K, M, bias): x [N, K], w [M, K], b [M]; small shapes with remainders (K and M no
    multiple of a vector or a band of rows, M below the tasks, K below one vector, N above 1), then
    GPT-2's. Each is named by its shapes only: which dimension fails is read from the pattern (dimension)."""
    c, inner, v = config.n_embd, config.n_inner or 4 * config.n_embd, config.vocab_size
    small = [(1, 37, 53), (1, 50, 7), (2, 5, 11), (3, 100, 29)]
    gpt2 = [("c_attn", c, 3 * c), ("attn.c_proj", c, c), ("c_fc", c, inner), ("mlp.c_proj", inner, c)]
    return [(shape_name(n, k, m), n, k, m, True) for n, k, m in small] + \
        [(f"{name} {shape_name(1, k, m)}", 1, k, m, True) for name, k, m in gpt2] + \
        [(f"head {shape_name(1, c, v)}, no bias", 1, c, v, False)]


def expected(x, w, b) -> np.ndarray:
    y = x.astype(np.float64) @ w.astype(np.float64).T
    return y if b is None else y + b
