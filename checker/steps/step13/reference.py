"""Step 13's references in numpy: attention_with_cache from Hugging Face's parameters, right and as its
known mistakes compute it, and the numpy GPT-2's last logits after a cache (for the model's mistakes)."""

from __future__ import annotations

import numpy as np

from checker.references.attention_np import merge_heads, softmax, split_heads

SPLIT = 7  # the model part: this many tokens at once, then the rest of the check's 10 on their cache


def attention(x, past_key, past_value, p, H, *, mask: str = "right", order: str = "past-first"):
    """attention_with_cache in numpy from Hugging Face's Conv1D parameters `p`: output, key, value.

    mask:  "right" (every cached key, the new ones causally), "hide-cache" (no cached key),
           "not-causal" (every key), "cache-last" (causal_mask(T, 0) on the first T keys, the
           cached ones after it, as if the cache came last)
    order: "past-first" (right) or "new-first" (the new keys concatenated before the cached)
    """
    qkv = x @ p["c_attn_weight"] + p["c_attn_bias"]
    q, k, v = (split_heads(t, H) for t in np.split(qkv, 3, axis=-1))
    pair = (past_key, k) if order == "past-first" else (k, past_key)
    key = np.concatenate(pair, axis=-2)
    value = np.concatenate((past_value, v) if order == "past-first" else (v, past_value), axis=-2)
    T, P = x.shape[1], past_key.shape[-2]
    future = np.triu(np.ones((T, T), dtype=bool), 1)
    blocked = {"right": np.concatenate([np.zeros((T, P), bool), future], axis=1),
               "hide-cache": np.concatenate([np.ones((T, P), bool), future], axis=1),
               "not-causal": np.zeros((T, P + T), bool),
               "cache-last": np.concatenate([future, np.zeros((T, P), bool)], axis=1)}[mask]
    scores = np.where(blocked, -np.inf, q @ np.swapaxes(key, -1, -2) / np.sqrt(q.shape[-1]))
    out = merge_heads(softmax(scores) @ value) @ p["c_proj_weight"] + p["c_proj_bias"]
    return out, key, value


def last_logits(model, ids, positions):
    """The numpy GPT-2's last-position logits for `ids` [B, T] at `positions` [T], float64 [B, V]."""
    return (model().hidden(ids, positions=positions) @ model().wte.T.astype(np.float64))[:, -1]
