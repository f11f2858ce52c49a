"""The stand-in for MAX's paged-cache kernels (checker.running.paged), with which step 14's check runs a
learner's model op by op before compiling it: it must compute what MAX's kernels compute, for every call
it takes, and refuse every call it does not cover."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
from max.dtype import DType
from max.experimental import functional as F
from max.experimental.nn import Module
from max.experimental.tensor import Tensor
from max.nn.attention import MHAMaskVariant
from max.nn.kernels import flash_attention_ragged, store_k_cache_ragged, store_v_cache_ragged

from checker.steps.step14 import check as step14
from checker.steps.step14 import paged as step14_paged
from checker.steps.step14 import reference as step14_reference

pytestmark = pytest.mark.slow  # one compile of MAX's paged kernels

H, D, V = 2, 8, 64
CONFIG = SimpleNamespace(n_head=H, n_embd=H * D)
store_k = F.functional(store_k_cache_ragged)  # bound at import, as a step file binds them
store_v = F.functional(store_v_cache_ragged)


class Kernels(Module):
    """Every kind of call the stand-in takes, on q, k, v drawn from the tokens: both layers, the stores
    swapped in one, the causal mask and none, two scales, one attention through F.functional inline."""

    def __init__(self, kv_params):
        rng = np.random.default_rng(14)
        self.q, self.k, self.v = (Tensor.from_dlpack(rng.standard_normal((V, H * D)).astype(np.float32))
                                  for _ in range(3))
        self.kv_params = kv_params

    def forward(self, tokens, kv_collection, input_row_offsets):
        q, k, v = (F.gather(w, tokens, axis=0).reshape([-1, H, D]) for w in (self.q, self.k, self.v))  # [T, H, D]
        layers = [Tensor(i, dtype=DType.uint32, device=tokens.device) for i in range(2)]
        store_k(kv_collection, k, input_row_offsets, layers[0])
        store_v(kv_collection, v, input_row_offsets, layers[0])
        store_k(kv_collection, v, input_row_offsets, layers[1])  # swapped, as a learner might
        store_v(kv_collection, k, input_row_offsets, layers[1])
        attend = F.functional(flash_attention_ragged)
        outs = [attend(self.kv_params, q, input_row_offsets, kv_collection, layers[0], MHAMaskVariant.CAUSAL_MASK,
                       scale=1 / math.sqrt(D)),
                attend(self.kv_params, q, input_row_offsets, kv_collection, layers[1], MHAMaskVariant.NULL_MASK,
                       scale=0.3)]
        return F.concat([o.reshape([-1, H * D]) for o in outs], axis=-1)  # [T, 2 H D]


def test_the_stand_in_computes_what_maxs_kernels_compute():
    """SCENARIO's three batches (prompts, decodes after cached positions, a request back after sitting a
    batch out), compiled with MAX's kernels and op by op with the stand-in: the same numbers."""
    import sys

    kv_params = step14_paged.paged_params(CONFIG, step14_reference.PAGED_LAYERS)
    tokens = step14_reference.scenario_tokens(V)
    model = Kernels(kv_params)
    compiled, _ = step14_paged.compile_probed(model, kv_params)
    want, _ = step14_paged.run_scenario(compiled, kv_params, tokens)
    eager = step14.run_eagerly(model, [sys.modules[__name__]], CONFIG, tokens)
    assert eager is not None, "the stand-in refused a call it covers"
    for batch, (got, expected) in enumerate(zip(eager[0], want)):
        assert got.shape == expected.shape, (batch, got.shape, expected.shape)
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5, err_msg=f"batch {batch + 1}")


class Refused(Module):
    """A call outside the stand-in's contract: the check must compile instead of guessing."""

    def __init__(self, kv_params, call: str):
        self.kv_params, self.call = kv_params, call

    def forward(self, tokens, kv_collection, input_row_offsets):
        x = Tensor.zeros([int(tokens.shape[0]), H, D], dtype=DType.float32, device=tokens.device)
        layer = Tensor(0, dtype=DType.int64 if self.call == "int64 layer" else DType.uint32, device=tokens.device)
        store_k(kv_collection, x, input_row_offsets, layer)
        mask = MHAMaskVariant.SLIDING_WINDOW_CAUSAL_MASK if self.call == "sliding window" else \
            MHAMaskVariant.CAUSAL_MASK
        window = 4 if self.call == "sliding window" else -1
        return F.functional(flash_attention_ragged)(self.kv_params, x, input_row_offsets, kv_collection, layer, mask,
                                                    scale=1.0, local_window_size=window)


@pytest.mark.parametrize("call", ["int64 layer", "sliding window"])
def test_a_call_the_stand_in_does_not_cover_is_refused(call):
    import sys

    kv_params = step14_paged.paged_params(CONFIG, step14_reference.PAGED_LAYERS)
    assert step14.run_eagerly(Refused(kv_params, call), [sys.modules[__name__]], CONFIG,
                              step14_reference.scenario_tokens(V)) is None
