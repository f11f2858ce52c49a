"""A learner's paged attention compiled around the check's own pool, for run_kernel's child.

MAX runs a custom op that writes a buffer in place (the paged cache) only inside a compiled graph. The
learner's `paged_flash_attention(q, k, v, kv_collection, input_row_offsets, layer)` is called while a graph
is built whose inputs are a case's arrays: kv_collection is made of them as MAX's serving stack makes it
(KVCacheInputsPerDevice: the pool kv_blocks, cache_lengths, lookup_table), so the learner's op reads and
writes the check's pool, which the parent then compares.

    paged(fn)(q, k, v, blocks, cache_lengths, lookup, offsets, layer)   Tensors -> the output [T, H, D];
                                                                        blocks written in place
"""

from __future__ import annotations

import numpy as np

from runtime.compiling import session

# MAX is imported inside the functions that use it: importing it takes seconds.


def paged(fn):
    """`fn` (the learner's paged_flash_attention) as a callable of the case's Tensors, compiled once per layer."""
    compiled = {}

    def call(q, k, v, blocks, cache_lengths, lookup, offsets, layer):
        which = int(np.from_dlpack(layer)[0])
        if which not in compiled:
            compiled[which] = _compile(fn, which)
        out = compiled[which](q, k, v, blocks, cache_lengths, lookup, offsets)
        return out[0] if isinstance(out, (list, tuple)) else out

    return call


def _compile(fn, layer: int):
    from max.dtype import DType
    from max.experimental.nn import Module
    from max.experimental.tensor import Tensor
    from max.graph import BufferType, DeviceRef, TensorType
    from max.nn.kv_cache import KVCacheInputsPerDevice

    cpu = DeviceRef.CPU()

    class Paged(Module):
        def forward(self, q, k, v, blocks, cache_lengths, lookup, offsets):
            def scalar(dtype):
                return Tensor([0], dtype=dtype, device=q.device)._graph_value

            kv = KVCacheInputsPerDevice(kv_blocks=blocks._graph_value, cache_lengths=cache_lengths._graph_value,
                                        lookup_table=lookup._graph_value, max_prompt_length=scalar(DType.uint32),
                                        max_cache_length=scalar(DType.uint32), page_stride=scalar(DType.int64))
            return fn(q, k, v, kv, offsets, layer)

    new = TensorType(DType.float32, ["rows", "heads", "head_dim"], cpu)
    return Paged().compile(new, new, new,
                           BufferType(DType.float32, ["pages", 2, "layers", "page", "heads", "head_dim"], cpu),
                           TensorType(DType.uint32, ["batch"], cpu), TensorType(DType.uint32, ["batch", "width"], cpu),
                           TensorType(DType.uint32, ["offsets"], cpu), session=session())
