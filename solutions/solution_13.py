"""Step 13 solution: generation with a KV cache.

Step 12's `generate` runs the whole sequence through the model for every new
token: T + (T+1) + ... positions for T-token prompts. Yet a position's key and
value never change once computed (attention is causal), and attention is the
only place where positions meet. So keep them: the cache. The prompt runs once
("prefill"), then each new token runs alone ("decode"), its query attending
to every cached key.

Shapes, with P = positions already cached, T = new positions (the prompt's
length at prefill, 1 at decode), L = n_layer, H = n_head, D = head_dim:

    cache          2L x [B, H, P, D]   keys and values, layer by layer: k_0, v_0, k_1, v_1, ...
    input_ids      [B, T]              positions P .. P+T-1
    logits         [B, V]              the last position's: the next token's scores
    new cache      2L x [B, H, P+T, D]

One compiled graph serves prefill and decode: P is a symbolic dimension,
known only when the graph runs.
"""

import math
from collections.abc import Iterator

import numpy as np
from max.experimental import functional as F
from max.experimental.nn import Module
from max.experimental.tensor import Tensor

from solutions.solution_02 import causal_mask
from solutions.solution_07 import GPT2MultiHeadAttention
from solutions.solution_11 import GPT2LMHeadModel
from solutions.solution_12 import next_token


def empty_cache(config, batch_size: int) -> list[Tensor]:
    """2L empty caches [B, H, 0, D], float32: the cache before the prompt."""
    head_dim = config.n_embd // config.n_head
    empty = np.zeros((batch_size, config.n_head, 0, head_dim), dtype=np.float32)
    return [Tensor.from_dlpack(empty) for _ in range(2 * config.n_layer)]


def attention_with_cache(attn: GPT2MultiHeadAttention, hidden_states: Tensor, past_key: Tensor,
                         past_value: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Step 07's attention over the cached positions and the new ones.

    hidden_states [B, T, C], past_key and past_value [B, H, P, D]
      -> output [B, T, C], key and value [B, H, P+T, D] (the cache, grown)
    """
    query, key, value = F.split(attn.c_attn(hidden_states), [attn.split_size] * 3, axis=-1)
    query, key, value = (attn._split_heads(t, attn.num_heads, attn.head_dim) for t in (query, key, value))
    key = F.concat([past_key, key], axis=-2)  # [B, H, P+T, D]: the cached positions first
    value = F.concat([past_value, value], axis=-2)

    # causal_mask(T, P)'s values: every new query sees all P cached keys, and the new keys up to
    # its own. Built in two pieces because band_part needs P as a Python int, and in a compiled
    # graph P is symbolic.
    seq_len, past = query.shape[-2], past_key.shape[-2]
    seen = F.broadcast_to(Tensor(0.0, dtype=query.dtype, device=query.device), [seq_len, past])  # [T, P]
    mask = F.concat([seen, causal_mask(seq_len, 0, dtype=query.dtype, device=query.device)], axis=-1)

    scores = query @ key.transpose(-1, -2) / math.sqrt(attn.head_dim) + mask  # [B, H, T, P+T]
    heads = F.softmax(scores, axis=-1) @ value  # [B, H, T, D]
    output = attn.c_proj(attn._merge_heads(heads, attn.num_heads, attn.head_dim))  # [B, T, C]
    return output, key, value


class GPT2WithCache(Module):
    """A loaded GPT2LMHeadModel (step 11) that reads and grows a KV cache; its modules, shared."""

    def __init__(self, model: GPT2LMHeadModel):
        self.transformer = model.transformer

    def forward(self, input_ids: Tensor, *cache: Tensor) -> tuple[Tensor, ...]:
        """input_ids [B, T], cache 2L x [B, H, P, D] -> (logits [B, V], *cache 2L x [B, H, P+T, D])"""
        t = self.transformer
        seq_len, past = input_ids.shape[-1], cache[0].shape[-2]
        x = t.wte(input_ids) + t.wpe(seq_len, past)  # [B, T, C]: positions P .. P+T-1
        new_cache = []
        for i, block in enumerate(t.h):
            attended, key, value = attention_with_cache(block.attn, block.ln_1(x), cache[2 * i], cache[2 * i + 1])
            x = x + attended
            x = x + block.mlp(block.ln_2(x))
            new_cache += [key, value]
        last = t.ln_f(x[:, -1, :])  # [B, C]: only the last position predicts the next token
        return (last @ t.wte.weight.T, *new_cache)  # tied head: [B, V]


def generate_with_cache(model, config, input_ids: list[int], max_new_tokens: int, *,
                        temperature: float = 0.0, top_k: int | None = None, seed: int | None = None,
                        eos_token_id: int | None = None) -> Iterator[int]:
    """Step 12's generate, with the cache: the prompt runs once, then one position per new token.

    `model` is a GPT2WithCache, usually compiled: (ids [1, T], *cache) -> (logits [1, V], *cache).
    """
    rng = np.random.default_rng(seed)
    cache = empty_cache(config, 1)
    ids = np.array([input_ids], dtype=np.int64)  # [1, T]: the whole prompt, once
    for _ in range(max_new_tokens):
        logits, *cache = model(Tensor.from_dlpack(ids), *cache)
        token = next_token(np.from_dlpack(logits)[0], temperature=temperature, top_k=top_k, rng=rng)
        yield token
        if token == eos_token_id:
            return
        ids = np.array([[token]], dtype=np.int64)  # [1, 1]: only the new token; the cache holds the rest
