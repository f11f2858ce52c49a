"""Greedy decoding over a compiled model with a KV cache, and decode speed measured side by side.

    greedy_with_cache(run, cache, ids [B, T], steps)          -> new ids [B, steps + 1], seconds of the steps
    greedy_steps(run, config, empty_cache, prompt, steps)     -> new ids, each decode step's logits [V]
    decode_rates({name: run}, config, empty_cache)            -> tokens/s of each, taken in turn
    in_place(model, caches), no_positions                     a model whose caches are written in place, as a run

`run` is what runtime.compiling makes: ids and 2L caches in, logits and the grown caches out.
MAX is imported inside the functions: importing it takes seconds.
"""

from __future__ import annotations

import time

import numpy as np

from runtime.bandwidth import busy_note, others_busy, settled


def greedy_with_cache(run, cache: list, input_ids: np.ndarray, steps: int) -> tuple[np.ndarray, float]:
    """Greedy generation through `run`: input_ids [B, T] and its empty cache 2L x [B, H, 0, D] -> new ids
    [B, steps + 1], and the seconds of the `steps` one-position steps alone (the prompt's pass gives the
    first new token, untimed)."""
    from max.experimental.tensor import Tensor

    logits, *cache = run(Tensor.from_dlpack(np.ascontiguousarray(input_ids, dtype=np.int64)), *cache)
    new = [np.from_dlpack(logits).argmax(axis=-1)[:, None].astype(np.int64)]  # [B, 1]
    started = time.perf_counter()
    for _ in range(steps):
        logits, *cache = run(Tensor.from_dlpack(new[-1]), *cache)
        new.append(np.from_dlpack(logits).argmax(axis=-1)[:, None].astype(np.int64))
    return np.concatenate(new, axis=1), time.perf_counter() - started


def greedy_steps(run, config, empty_cache, prompt: list[int], steps: int, *,
                 first: list | None = None) -> tuple[list[int], list[np.ndarray]]:
    """Greedy generation: the new ids, and the logits [V] each decode step gave (after the first token);
    the prompt's pass's logits [V], which pick the first, appended to `first` when given."""
    from max.experimental.tensor import Tensor

    logits, *cache = run(Tensor.from_dlpack(np.array([prompt], np.int64)), *empty_cache(config, 1))
    if first is not None:
        first.append(np.from_dlpack(logits)[0].astype(np.float64))
    ids, decoded = [int(np.from_dlpack(logits)[0].argmax())], []
    for _ in range(steps - 1):
        logits, *cache = run(Tensor.from_dlpack(np.array([[ids[-1]]], np.int64)), *cache)
        decoded.append(np.from_dlpack(logits)[0].astype(np.float64))
        ids.append(int(decoded[-1].argmax()))
    return ids, decoded


def decode_rates(runs: dict, config, empty_cache, *, prompt_length: int = 32, steps: int = 48,
                 rounds: int = 2) -> tuple[dict[str, float], list[str]]:
    """Decode tokens/s of each run (name -> callable), interleaved, the best of `rounds` kept; and a line
    for a report when other programs shared the CPU meanwhile (bandwidth.busy_note). Each run waits until
    the threads of the one before are quiet (bandwidth.settled)."""
    prompt = np.random.default_rng(0).integers(0, min(config.vocab_size, 400), (1, prompt_length))
    rates: dict[str, list[float]] = {name: [] for name in runs}
    with others_busy() as busy:
        for _ in range(rounds):
            for name, run in runs.items():
                settled()
                _, seconds = greedy_with_cache(run, empty_cache(config, 1), prompt, steps)
                rates[name].append(steps / seconds)
    return {name: max(r) for name, r in rates.items()}, busy_note(busy)


def in_place(model, caches: list):
    """A model that writes its caches in place (step 17's GPT2Flash, compiled: (ids [B, T], past [1] int64,
    *caches) -> logits [B, V]) as the loops above take a model: (ids, past) -> (logits, past + T), `caches`
    held here and the loops' cache being the count of positions they hold (`no_positions` gives the first)."""
    from max.experimental.tensor import Tensor

    def run(input_ids, past: int):
        logits = model(input_ids, Tensor.from_dlpack(np.array([past], np.int64)), *caches)
        return logits, past + int(input_ids.shape[-1])

    return run


def no_positions(config, batch_size: int) -> list[int]:
    """The first 'cache' of an in_place model: no position held yet."""
    return [0]
