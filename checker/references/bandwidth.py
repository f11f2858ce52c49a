"""The decode speed limit: weight bytes read per token against the machine's memory bandwidth.

Generating one token with a KV cache multiplies one vector by every weight
matrix once, so at batch 1 each token reads all the weights from memory:

    tokens/s limit = read bandwidth (bytes/s) / weight bytes read per token

The bandwidth is measured here, in the same process as the bench: one thread
per CPU each sums its share of a float32 array larger than the caches (reads
only, like the weights), best of several passes.
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np


def read_bandwidth(nbytes: int = 512 * 2**20, passes: int = 5, threads: int | None = None) -> float:
    """Bytes per second read from memory by `threads` threads (default: one per CPU)."""
    threads = threads or os.cpu_count() or 1
    data = np.ones(nbytes // 4, dtype=np.float32)  # written once, so every page is in memory
    shares = np.array_split(data, threads)
    best = float("inf")
    for _ in range(passes):
        workers = [threading.Thread(target=np.sum, args=(share,)) for share in shares]  # numpy drops the GIL
        started = time.perf_counter()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        best = min(best, time.perf_counter() - started)
    return data.nbytes / best


def weight_bytes_per_token(config, bytes_per_value: int = 4) -> int:
    """Bytes of weights one decode step reads: every block, ln_f and the tied head [V, C].

    The embeddings read one row each (wte's full table is read once, as the head);
    wpe reads one row, counted as nothing.
    """
    c, inner = config.n_embd, config.n_inner
    block = (c * 3 * c + 3 * c) + (c * c + c) + (c * inner + inner) + (inner * c + c) + 4 * c  # attn, mlp, 2 ln
    return bytes_per_value * (config.n_layer * block + 2 * c + config.vocab_size * c)
