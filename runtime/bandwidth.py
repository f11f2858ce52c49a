"""The decode speed limit: weight bytes read per token against the machine's memory bandwidth.

Generating one token with a KV cache multiplies one vector by every weight
matrix once, so at batch 1 each token reads all the weights from memory:

    tokens/s limit = read bandwidth (bytes/s) / weight bytes read per token

The bandwidth is measured here, in the same process as the bench: one thread
per CPU each sums its share of a float32 array larger than the caches (reads
only, like the weights), best of several passes.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import threading
import time
from pathlib import Path

import numpy as np

from runtime.quantize import BLOCK


def run_seconds(fn, repeats: int) -> list[float]:
    """The wall time of each of `repeats` runs of `fn()`, after one warm-up run."""
    fn()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return times


def alternating_seconds(fns: dict, rounds: int) -> dict:
    """{key: the wall time of each of `rounds` runs of fns[key]()}: every fn once a round, the order turned
    round after round (a minute's change falls on each alike), after one warm-up round."""
    took: dict = {key: [] for key in fns}
    order = list(fns)
    for round_ in range(rounds + 1):
        for key in order if round_ % 2 else order[::-1]:
            started = time.perf_counter()
            fns[key]()
            if round_:  # the first round is a warm-up
                took[key].append(time.perf_counter() - started)
    return took


def median_seconds(fn, repeats: int) -> float:
    """The median wall time of `fn()` over `repeats` runs, after one warm-up run."""
    return statistics.median(run_seconds(fn, repeats))


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


def products(config) -> dict[tuple[int, int], tuple[str, int]]:
    """A decode step's weight products by their weight's [M, K]: {shape: (names, how many a step)}."""
    c, inner = config.n_embd, config.n_inner or 4 * config.n_embd
    found: dict[tuple[int, int], tuple[str, int]] = {}
    for shape, name, count in (((3 * c, c), "c_attn", config.n_layer), ((c, c), "attn.c_proj", config.n_layer),
                               ((inner, c), "c_fc", config.n_layer), ((c, inner), "mlp.c_proj", config.n_layer),
                               ((config.vocab_size, c), "the tied head", 1)):
        names, n = found.get(shape, ("", 0))
        found[shape] = (f"{names} or {name}" if names else name, n + count)
    return found


def int8_bytes_per_token(config) -> int:
    """Bytes one int8 decode step reads: each product's weights as int8 plus a float32 scale per BLOCK, its
    bias and the LayerNorms as float32."""
    n = sum(m * k * count for (m, k), (_, count) in products(config).items())
    return weight_bytes_per_token(config) - 4 * n + n + 4 * n // BLOCK


def _cpu_ticks() -> tuple[int, int]:
    """(busy, all) clock ticks of every CPU since boot (Linux's /proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields) - fields[3] - fields[4], sum(fields)  # idle and iowait are not busy


@contextlib.contextmanager
def others_busy():
    """Yields a list that holds, after the block, the share of the machine's CPU time other processes used
    while it ran (0.3: 30%); empty where /proc/stat is not (not Linux)."""
    share: list[float] = []
    try:
        busy0, all0 = _cpu_ticks()
    except OSError:
        yield share
        return
    own0 = os.times()
    yield share
    busy1, all1 = _cpu_ticks()
    own1 = os.times()
    ours = (own1.user - own0.user + own1.system - own0.system) * os.sysconf("SC_CLK_TCK")
    share.append(max(0.0, (busy1 - busy0 - ours) / max(all1 - all0, 1)))


def settled(window: float = 0.1, below: float = 0.2, at_most: float = 3.0) -> float:
    """Waits until this process's threads are quiet (under `below` of one CPU over `window` seconds), at
    most `at_most` seconds; returns the seconds waited. A runtime's worker threads spin for a while
    after their work (MAX's about half a second, OpenMP's too), taking the CPU from whatever is timed
    next in the same process: a timing that follows another waits for this first."""
    started = time.perf_counter()
    while time.perf_counter() - started < at_most:
        own0, t0 = os.times(), time.perf_counter()
        time.sleep(window)
        own1 = os.times()
        if (own1.user - own0.user + own1.system - own0.system) / (time.perf_counter() - t0) < below:
            break
    return time.perf_counter() - started


def busy_note(share: list[float], above: float = 0.15) -> list[str]:
    """A line for a timing report when other processes took more than `above` of the CPU while it was timed."""
    if not share or share[0] <= above:
        return []
    return [f"other programs used {share[0]:.0%} of this machine's CPU while it was timed: these rates are lower "
            "than an idle machine gives, and vary from run to run"]
