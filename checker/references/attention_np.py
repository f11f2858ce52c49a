"""GPT-2 attention in numpy, with switches for the mistakes learners make.

The step 07 check computes what each known mistake would output, from the
same reference inputs the learner's code gets, and compares. Everything runs
in float64. Shapes: B sequences, T tokens, C = n_embd, H heads, D = C / H.
"""

from __future__ import annotations

import numpy as np


def split_heads(t: np.ndarray, H: int) -> np.ndarray:
    """[B, T, C] -> [B, H, T, D]"""
    B, T, C = t.shape
    return t.reshape(B, T, H, C // H).transpose(0, 2, 1, 3)


def merge_heads(t: np.ndarray) -> np.ndarray:
    """[B, H, T, D] -> [B, T, C]"""
    B, H, T, D = t.shape
    return t.transpose(0, 2, 1, 3).reshape(B, T, H * D)


def causal_mask(T: int, N: int, *, allowed=lambda q, k, N: k <= N + q, masked=-np.inf, kept=0.0, width=None):
    """The causal mask for T new positions after N cached ones: [T, width or N + T], `kept` where
    allowed(query, key, N) and `masked` elsewhere (0 and -inf by default: query i sees keys 0 .. N + i)."""
    q, k = np.indices((T, width or N + T))
    return np.where(allowed(q, k, N), kept, masked)


def softmax(s: np.ndarray, axis: int = -1) -> np.ndarray:
    s = s - np.max(s, axis=axis, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(s: np.ndarray, axis: int = -1) -> np.ndarray:
    """log(softmax(s)) without underflow: finite even where softmax rounds to 0."""
    s = s - np.max(s, axis=axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


def attend(q, k, v, *, scale: str = "sqrt_d", mask: str = "-inf", axis: int = -1) -> np.ndarray:
    """softmax(q k^T / scale + mask) v, per head: [B, H, T, D] x 3 -> [B, H, T, D]

    scale: "sqrt_d" (right), "sqrt_c", "d" or "none"
    mask:  "-inf" (right), "none", "0/1" (adds 1 to future scores),
           "multiply" (scores times a 0/1 mask), "after_softmax" (zeroes weights),
           "-inf_after_softmax" (adds the -inf mask to the weights: NaN/inf out)
    axis:  the softmax axis; -1 (the keys) is right
    """
    H, T, D = q.shape[-3:]
    s = q @ np.swapaxes(k, -1, -2)
    s = s / {"sqrt_d": np.sqrt(D), "sqrt_c": np.sqrt(H * D), "d": D, "none": 1.0}[scale]
    future = np.triu(np.ones((T, T), dtype=bool), 1)
    if mask == "-inf":
        s = np.where(future, -np.inf, s)
    elif mask == "0/1":
        s = s + future
    elif mask == "multiply":
        s = s * ~future
    w = softmax(s, axis)
    if mask == "after_softmax":
        w = w * ~future
    elif mask == "-inf_after_softmax":
        w = np.where(future, -np.inf, w)
    with np.errstate(invalid="ignore"):
        return w @ v


def forward(
    x, p, H, *, order="qkv", split=split_heads, attn=attend, merge=merge_heads,
    c_proj="linear", attn_bias=True, proj_bias=True,
) -> np.ndarray:
    """The whole layer, [B, T, C] -> [B, T, C], from Hugging Face's Conv1D parameters `p`.

    order:  which thirds of c_attn's output are used as q, k and v ("qkv" is right)
    c_proj: "linear" (right), "missing", or "untransposed" (x @ W with W stored [out, in])
    """
    qkv = x @ p["c_attn_weight"] + (p["c_attn_bias"] if attn_bias else 0)
    thirds = dict(zip("qkv", np.split(qkv, 3, axis=-1)))
    q, k, v = (split(thirds[name], H) for name in order)
    merged = merge(attn(q, k, v))
    if c_proj == "missing":
        return merged
    w = p["c_proj_weight"].T if c_proj == "untransposed" else p["c_proj_weight"]
    with np.errstate(invalid="ignore"):  # a mistake may put NaN in `merged`
        return merged @ w + (p["c_proj_bias"] if proj_bias else 0)
