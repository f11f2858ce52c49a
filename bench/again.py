"""`python -m bench --again REPEATS`: a served graph given the same batch again and again; does it answer alike?

Step 14's served graph (`--fast`: step 18's), compiled as max serve compiles it (gpt2_arch's learner_model with
the solution as the served file, on MAX's paged cache), decodes BATCH requests (random prompts of PROMPT ids,
then a token a step, greedy) for STEPS steps, REPEATS times over, each time fresh requests of the same prompts;
every step's next-token logits [BATCH, V] are compared bit for bit with the first time's. The same inputs give
the same numbers on a correct graph, so a step that differs is a fault of the graph or of the kernels under it.
With `--busy` a busy loop runs beside it on every CPU (stopped when it ends): step 14's server gave wrong texts
once in many rounds under load, and its graph alone did the same beside busy loops, until a step's cache inputs
were waited for (runtime.kv_inputs; the performance page, "Step 14's fault, found"). Exit status 1 if any step
differed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from unittest import mock

import numpy as np

from bench.machine import neighbours
from bench.served_split import PROMPT, _Requests, kv_params_for
from runtime.paths import REPO
from runtime.server import PAGE, SERVED

# MAX, gpt2_arch (MAX's serving stack) and the solutions are imported inside the functions that use them: importing
# them takes seconds.

BATCH, STEPS = 32, 64  # requests (of served_split's PROMPT ids each), steps (the prompt's the first)


def first_difference(first: list[np.ndarray], again: list[np.ndarray]) -> tuple[int, float] | None:
    """The first step whose logits are not bit for bit the first time's, and how far apart they are there; None if
    every step is alike."""
    for step, (a, b) in enumerate(zip(first, again)):
        if not np.array_equal(a, b):
            return step, float(np.abs(a - b).max())
    return None


def _graph(folder: Path, kv_params, fast: bool):
    """The graph max serve compiles for step 18's solution (fast) or step 14's: gpt2_arch's learner_model, the
    solution as the served file."""
    from max.graph import DeviceRef
    from max.pipelines.lib.interfaces.batch_processor import modulev3_ragged_kv_symbolic_inputs

    from gpt2_arch.model import learner_model

    with mock.patch.dict(os.environ, {SERVED: str(REPO / "solutions" / f"solution_{18 if fast else 14}.py")}):
        served = learner_model(kv_params, folder)
    return served.compile(*modulev3_ragged_kv_symbolic_inputs(kv_params=kv_params, device_refs=[DeviceRef.CPU()]))


def _decoded(graph, manager, batch: int, vocab: int, steps: int) -> list[np.ndarray]:
    """Every step's next-token logits [batch, V] of `batch` fresh requests (served_split's, the same prompts each
    time), a prompt step and then greedy steps."""
    requests = _Requests(graph, manager, batch, np.random.default_rng(0), PROMPT, vocab)
    try:
        out = []
        for _ in range(steps):
            requests.step()
            out.append(requests.logits.copy())
        return out
    finally:
        requests.release()


def main(folder: Path, config, repeats: int, fast: bool, load: bool, batch: int = BATCH, steps: int = STEPS) -> int:
    from max.driver import CPU
    from max.engine import InferenceSession
    from max.pipelines.kv_cache import PagedKVCacheManager

    kv_params = kv_params_for(config)
    graph = _graph(folder, kv_params, fast)
    pages = batch * -(-(PROMPT + steps) // PAGE) + 1
    manager = PagedKVCacheManager(params=kv_params, session=InferenceSession(devices=[CPU()]), total_num_pages=pages,
                                  max_batch_size=batch)
    vocab = json.loads((folder / "config.json").read_text())["vocab_size"]
    name = "step 18's" if fast else "step 14's"
    print(f"{name} served graph, {batch} requests of {PROMPT}-token prompts, {steps} steps, {repeats} times"
          + (f", a busy loop on each of {os.cpu_count()} CPUs beside it" if load else "") + ":", flush=True)
    differed = 0
    with neighbours(os.cpu_count() if load else 0):
        first = _decoded(graph, manager, batch, vocab, steps)
        for r in range(1, repeats):
            found = first_difference(first, _decoded(graph, manager, batch, vocab, steps))
            differed += found is not None
            print(f"time {r + 1}: " + ("as the first" if found is None else
                                       f"differs first at step {found[0]} (logits up to {found[1]:.3g} apart there)"),
                  flush=True)
    print(f"{differed} of {repeats - 1} times differed from the first.")
    return 1 if differed else 0
