"""runtime/kv_inputs.py: a graph run right after `staged` reads the cache lengths of its own step, also beside a
busy loop on every CPU, where MAX 26.7's runtime_inputs alone lets it read the step before's now and then: this
test with `staged` replaced by `manager.runtime_inputs` failed with 11 of 3600 steps on a 2-core EPYC (10 and 19
in two runs of the same loop before)."""

import os

import numpy as np
import pytest

from bench.machine import neighbours
from runtime.kv_inputs import staged

BATCH, STEPS = 32, 3600  # GPT-2's cache (12 layers of 12 heads)


@pytest.mark.slow
def test_a_graph_run_after_staged_reads_its_own_steps_cache_lengths():
    from max import tree
    from max.driver import CPU, Buffer
    from max.dtype import DType
    from max.engine import InferenceSession
    from max.graph import DeviceRef, Graph, TensorType, ops
    from max.nn.kv_cache import MHAKVCacheParams
    from max.pipelines.context import TextContext, TokenBuffer
    from max.pipelines.kv_cache import PagedKVCacheManager
    from max.pipelines.modeling.types import RequestID

    session = InferenceSession(devices=[CPU()])
    params = MHAKVCacheParams(dtype=DType.float32, n_kv_heads=12, head_dim=64, num_layers=12, page_size=128,
                              devices=[DeviceRef.CPU()])
    manager = PagedKVCacheManager(params=params, session=session, total_num_pages=BATCH * 30 + 1,
                                  max_batch_size=BATCH)
    with Graph("lengths", input_types=[TensorType(DType.uint32, [BATCH], device=DeviceRef.CPU())]) as graph:
        graph.output(ops.cast(graph.inputs[0], DType.int64) + 0)  # the cache lengths the graph was given
    model = session.load(graph)
    contexts = [TextContext(request_id=RequestID(), max_length=4096, tokens=TokenBuffer(np.arange(5 + i)))
                for i in range(BATCH)]
    for context in contexts:
        manager.claim(context)
    differed = []
    with neighbours(os.cpu_count() or 1):
        for step in range(STEPS):
            for context in contexts:
                manager.alloc(context)
            lengths = next(leaf for leaf in tree.leaves(staged(manager, [contexts]))
                           if isinstance(leaf, Buffer) and leaf.dtype == DType.uint32 and leaf.num_elements == BATCH)
            (read,) = model.execute(lengths)
            if not np.array_equal(read.to_numpy(), [c.tokens.processed_length for c in contexts]):
                differed.append(step)
            for context in contexts:
                context.update(1)
                manager.step(context)
    assert not differed, f"{len(differed)} of {STEPS} steps read other cache lengths, first at step {differed[0]}"
