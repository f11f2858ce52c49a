"""GPT-2 generation with a KV cache: each new token costs one position, not the whole sequence again.

The course's model (steps 01-11) reruns every position for every new token:
generating n tokens after a T-token prompt processes T + (T+1) + ... + (T+n-1)
positions. Attention is the only place where positions meet, and a position's
key and value never change once computed, so they can be kept: the cache.

    prefill  input_ids [B, T], empty cache 2L x [B, H, 0, D] -> logits [B, V] (last position), cache 2L x [B, H, T, D]
    decode   input_ids [B, 1], cache 2L x [B, H, P, D]       -> logits [B, V],                 cache 2L x [B, H, P+1, D]

One compiled graph does both: the cache length P is a symbolic dimension.
`GPT2WithCache` is built on a loaded `GPT2LMHeadModel` (step 11) and reuses
its modules (wte, wpe with its past_length, each block's c_attn,
_split_heads, _merge_heads, c_proj and mlp, ln_f and the tied head), so the
weights load by the same names. Two things differ from the teaching path:
  - LayerNorm runs as MAX's single `F.layer_norm` op with the module's own
    weight, bias and eps (what step 03 computes in five ops; one op is faster);
  - the mask: step 02's `causal_mask(T, num_tokens)` gives `F.band_part` the
    band width num_tokens, which must be a Python int when the graph is built,
    but P is only known when it runs. `causal_mask_with_cache` builds the same
    [T, P + T] mask from zeros for the P cached keys (every new query sees
    them) and `causal_mask(T, 0)` for the new ones (tests/test_bench.py checks
    it equals `causal_mask(T, P)`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from solutions.solution_02 import causal_mask


def causal_mask_with_cache(sequence_length, num_tokens, *, dtype, device):
    """causal_mask(sequence_length, num_tokens) for a num_tokens that may be symbolic: [T, P + T]."""
    from max.experimental import functional as F
    from max.experimental.tensor import Tensor

    cached = F.broadcast_to(Tensor(0.0, dtype=dtype, device=device), [sequence_length, num_tokens])  # [T, P]
    new = causal_mask(sequence_length, 0, dtype=dtype, device=device)  # [T, T]
    return F.concat([cached, new], axis=-1)


def _gpt2_with_cache_class():
    from max.experimental import functional as F
    from max.experimental.nn import Module

    def layer_norm(ln, x):
        return F.layer_norm(x, gamma=ln.weight, beta=ln.bias, epsilon=ln.eps)

    class GPT2WithCache(Module):
        def __init__(self, model):
            self.transformer = model.transformer  # the loaded step 10 modules, shared

        def forward(self, input_ids, *cache):
            """input_ids [B, T], cache 2L x [B, H, P, D] (keys, values per layer) -> logits [B, V], new cache."""
            t = self.transformer
            seq_len, past = input_ids.shape[-1], cache[0].shape[-2]
            x = t.wte(input_ids) + t.wpe(seq_len, past)  # [B, T, C]: positions P .. P+T-1
            mask = causal_mask_with_cache(seq_len, past, dtype=x.dtype, device=x.device)  # [T, P+T]
            new_cache = []
            for i, block in enumerate(t.h):
                attn = block.attn
                q, k, v = F.split(attn.c_attn(layer_norm(block.ln_1, x)), [attn.split_size] * 3, axis=-1)
                q, k, v = (attn._split_heads(z, attn.num_heads, attn.head_dim) for z in (q, k, v))  # [B, H, T, D]
                k = F.concat([cache[2 * i], k], axis=-2)  # [B, H, P+T, D]
                v = F.concat([cache[2 * i + 1], v], axis=-2)
                scores = q @ k.transpose(-1, -2) / math.sqrt(attn.head_dim) + mask  # [B, H, T, P+T]
                heads = F.softmax(scores, axis=-1) @ v  # [B, H, T, D]
                x = x + attn.c_proj(attn._merge_heads(heads, attn.num_heads, attn.head_dim))
                x = x + block.mlp(layer_norm(block.ln_2, x))
                new_cache += [k, v]
            last = layer_norm(t.ln_f, x[:, -1, :])  # [B, C]: only the last position predicts
            return (last @ t.wte.weight.T, *new_cache)  # tied head: [B, V]

    return GPT2WithCache


def compile_with_cache(model, config) -> Callable:
    """`model` (a loaded GPT2LMHeadModel) with a KV cache, compiled: run(ids, *cache) -> (logits, *cache)."""
    from max.dtype import DType
    from max.graph import TensorType

    device = model.transformer.wte.weight.device
    head_dim = config.n_embd // config.n_head
    cache_type = TensorType(DType.float32, ["batch", config.n_head, "past", head_dim], device=device)
    ids_type = TensorType(DType.int64, ["batch", "seq"], device=device)
    return _gpt2_with_cache_class()(model).compile(ids_type, *[cache_type] * (2 * config.n_layer))


def empty_cache(config, batch: int) -> list:
    """2L zero-length caches [B, H, 0, D]."""
    from max.experimental.tensor import Tensor

    empty = np.zeros((batch, config.n_head, 0, config.n_embd // config.n_head), dtype=np.float32)
    return [Tensor.from_dlpack(empty)] * (2 * config.n_layer)


def prefill(run, config, input_ids: np.ndarray) -> tuple[np.ndarray, list]:
    """The prompt pass: input_ids [B, T] -> last-position logits [B, V] and the filled cache."""
    from max.experimental.tensor import Tensor

    logits, *cache = run(Tensor.from_dlpack(np.ascontiguousarray(input_ids, dtype=np.int64)),
                         *empty_cache(config, input_ids.shape[0]))
    return np.from_dlpack(logits), cache


def greedy(run, config, input_ids: np.ndarray, steps: int) -> tuple[np.ndarray, float]:
    """Greedy generation with the cache: input_ids [B, T] -> new ids [B, steps + 1], and the decode seconds.

    The prefill's logits give the first new token; each of the `steps` decode
    steps feeds the latest token (one position) and gives the next. The
    seconds are those of the decode steps alone.
    """
    import time

    from max.experimental.tensor import Tensor

    logits, cache = prefill(run, config, input_ids)
    new = [logits.argmax(axis=-1)[:, None].astype(np.int64)]  # [B, 1]
    started = time.perf_counter()
    for _ in range(steps):
        logits, *cache = run(Tensor.from_dlpack(new[-1]), *cache)
        new.append(np.from_dlpack(logits).argmax(axis=-1)[:, None].astype(np.int64))
    return np.concatenate(new, axis=1), time.perf_counter() - started
