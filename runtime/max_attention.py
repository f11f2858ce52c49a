"""MAX's own attention, compiled alone, to time a learner's against: flash_attention_ragged over MAX's paged
cache, the new keys and values stored first (store_k_cache_ragged, store_v_cache_ragged), as MAX's
pipelines call them, for one request through `layers` layers (each its own cache: read from memory, as in
a model, and a call's own cost spread over them).

    attention = MaxAttention(n_head, head_dim, n_positions, layers, requests)
    run = attention.call(past, T)   # q, k, v [T, n_head, head_dim] of T new positions after `past` cached
    run()                           # one call of the graph: each layer stores T keys and values, attends

Each call() is a request of its own, with its own pages (`requests` of them at most).
"""

from __future__ import annotations

import math

import numpy as np

from runtime.compiling import session
from runtime.kv_inputs import staged
from runtime.server import PAGE

# MAX is imported inside the class: importing it takes seconds.


class MaxAttention:
    def __init__(self, n_head: int, head_dim: int, n_positions: int, layers: int = 1, requests: int = 1):
        from max import tree
        from max.driver import CPU
        from max.dtype import DType
        from max.engine import InferenceSession
        from max.experimental import functional as F
        from max.experimental.nn import Module
        from max.experimental.tensor import Tensor
        from max.graph import DeviceRef, TensorType
        from max.nn.attention import MHAMaskVariant
        from max.nn.kernels import flash_attention_ragged, store_k_cache_ragged, store_v_cache_ragged
        from max.nn.kv_cache import KVCacheInputsPerDevice, MHAKVCacheParams
        from max.pipelines.kv_cache import PagedKVCacheManager
        from max.pipelines.lib.interfaces.batch_processor import modulev3_ragged_kv_symbolic_inputs

        params = MHAKVCacheParams(dtype=DType.float32, n_kv_heads=n_head, head_dim=head_dim, num_layers=layers,
                                  page_size=PAGE, devices=[DeviceRef.CPU()])
        kv_types = modulev3_ragged_kv_symbolic_inputs(kv_params=params, device_refs=[DeviceRef.CPU()])
        n_kv = len(kv_types) - 3  # the last three are the tokens, the logits' count and the row offsets
        store_k, store_v = F.functional(store_k_cache_ragged), F.functional(store_v_cache_ragged)
        attend = F.functional(flash_attention_ragged)

        class Attention(Module):
            def forward(self, tokens, n_logits, offsets, *rest):
                kv_inputs, (q, k, v) = rest[:n_kv], rest[n_kv:]
                (kv,) = tree.leaves(params.unflatten_kv_inputs(iter(x._graph_value for x in kv_inputs)),
                                    leaf=KVCacheInputsPerDevice)
                outputs = []
                for i in range(layers):
                    layer = Tensor(i, dtype=DType.uint32, device=q.device)
                    store_k(kv, k, offsets, layer)
                    store_v(kv, v, offsets, layer)
                    outputs.append(attend(params, q, offsets, kv, layer, mask_variant=MHAMaskVariant.CAUSAL_MASK,
                                          scale=1 / math.sqrt(head_dim)))
                return tuple(outputs)

        new = [TensorType(DType.float32, ["t", n_head, head_dim], device=DeviceRef.CPU()) for _ in range(3)]
        self._graph = Attention().compile(*kv_types, *new, session=session())
        self._manager = PagedKVCacheManager(params=params, session=InferenceSession(devices=[CPU()]),
                                            total_num_pages=requests * (math.ceil(n_positions / PAGE) + 1),
                                            max_batch_size=requests)
        self._tree, self._shape = tree, (n_head, head_dim)
        self._rng = np.random.default_rng(0)

    def call(self, past: int, T: int):
        """A call of T new positions after `past` cached ones (MAX's cache holds `past` positions first)."""
        from max.pipelines.context import TextContext, TokenBuffer
        from max.pipelines.modeling.types import RequestID

        if past:  # the cache's first `past` positions, written by a call of their own
            context = TextContext(request_id=RequestID(), max_length=past + T,
                                  tokens=TokenBuffer(np.zeros(past, np.int64)))
            self._manager.claim(context)
            self._inputs(context, past)()
            context.update(0)
            self._manager.step(context)
        else:
            context = TextContext(request_id=RequestID(), max_length=T, tokens=TokenBuffer(np.zeros(T, np.int64)))
            self._manager.claim(context)
        return self._inputs(context, T)

    def _inputs(self, context, T: int):
        from max.driver import Buffer

        self._manager.alloc(context)
        kv = self._tree.leaves(staged(self._manager, [[context]]))
        q, k, v = (Buffer.from_numpy(self._rng.standard_normal((T, *self._shape), dtype=np.float32))
                   for _ in range(3))
        tokens, n_logits = Buffer.from_numpy(np.zeros(T, np.int64)), Buffer.from_numpy(np.array([1], np.int64))
        offsets = Buffer.from_numpy(np.array([0, T], np.uint32))
        return lambda: self._graph(tokens, n_logits, offsets, *kv, q, k, v)
