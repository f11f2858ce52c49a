"""The bench's fast path: the course's step 13 solution (GPT2WithCache), compiled, driven for timing.

The model exists once, in solutions/solution_13.py: GPT2WithCache wraps the
loaded step 11 model and reads and grows a KV cache, and
`runtime.compiling.compile_with_cache` compiles it as `pixi run gpt2` runs it,
with the batch, the new length and the cache length symbolic. This module
only drives it:

    prefill  input_ids [B, T], empty cache 2L x [B, H, 0, D] -> logits [B, V] (last position), cache 2L x [B, H, T, D]
    decode   input_ids [B, 1], cache 2L x [B, H, P, D]       -> logits [B, V],                 cache 2L x [B, H, P+1, D]
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from runtime.compiling import compile_with_cache as compile_module
from runtime.decoding import greedy_with_cache

# MAX and the solutions (which import MAX) are imported inside the functions that use them: importing them
# takes seconds.


def compile_with_cache(model, config) -> Callable:
    """`model` (a loaded GPT2LMHeadModel) with solution 13's cache, compiled: run(ids, *cache) -> (logits, *cache)."""
    from solutions.solution_13 import GPT2WithCache

    return compile_module(GPT2WithCache(model), config)


def prefill(run, config, input_ids: np.ndarray) -> tuple[np.ndarray, list]:
    """The prompt pass: input_ids [B, T] -> last-position logits [B, V] and the filled cache."""
    from max.experimental.tensor import Tensor

    from solutions.solution_13 import empty_cache

    logits, *cache = run(Tensor.from_dlpack(np.ascontiguousarray(input_ids, dtype=np.int64)),
                         *empty_cache(config, input_ids.shape[0]))
    return np.from_dlpack(logits), cache


def greedy(run, config, input_ids: np.ndarray, steps: int) -> tuple[np.ndarray, float]:
    """Greedy generation with the cache: input_ids [B, T] -> new ids [B, steps + 1], and the decode seconds.

    The prefill's logits give the first new token; each of the `steps` decode
    steps feeds the latest token (one position) and gives the next. The
    seconds are those of the decode steps alone (runtime.decoding.greedy_with_cache).
    """
    from solutions.solution_13 import empty_cache

    return greedy_with_cache(run, empty_cache(config, input_ids.shape[0]), input_ids, steps)
