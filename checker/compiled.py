"""A whole GPT-2 (a learner's or the course's) as one compiled MAX graph.

Generation calls the model once per new token, so it runs as a graph compiled
with `Module.compile` rather than op by op. MAX caches compiled graphs on
disk: the first compile of a model takes 1.5-3 minutes on 2 cores, later ones
of the same code ~3 s.
"""

from __future__ import annotations

import sys
import time

from checker.weights import Checkpoint


def compile_gpt2(model_cls, load_hf_weights, checkpoint: Checkpoint, *, quiet: bool = False):
    """`model_cls(config)` with the checkpoint loaded by `load_hf_weights`, compiled for int64 ids [1, T]."""
    from max.driver import CPU
    from max.dtype import DType
    from max.experimental import functional as F
    from max.graph import TensorType

    from checker.step11 import stored_tensors

    with F.lazy():
        model = model_cls(checkpoint.learner_config())
    load_hf_weights(model, stored_tensors(checkpoint))
    started = time.perf_counter()
    if not quiet:
        print("Compiling the model into one MAX graph (~3 s when cached; 1.5-3 min the first time)...",
              file=sys.stderr, flush=True)
    compiled = model.compile(TensorType(DType.int64, [1, "seq"], device=CPU()))
    if not quiet:
        print(f"...compiled in {time.perf_counter() - started:.1f} s.", file=sys.stderr, flush=True)
    return compiled
