"""GPT-2's other pieces in numpy, with switches for the mistakes learners make.

Used, like `attention_np`, to compute what a known mistake would output from
the reference inputs. Float64 throughout; parameters in Hugging Face's layout
(Conv1D weights are [in, out]).
"""

from __future__ import annotations

from math import erf, sqrt

import numpy as np


def layer_norm(x, weight, bias, eps, *, ddof=0, eps_outside=False, affine=True, axis=-1, swap=False):
    """(x - mean) / sqrt(var + eps) * weight + bias, over the last axis.

    ddof=1: unbiased variance; eps_outside: / (sqrt(var) + eps); affine=False:
    no weight and bias; axis: the axis normalised; swap: weight and bias swapped.
    """
    mean = x.mean(axis=axis, keepdims=True)
    var = x.var(axis=axis, keepdims=True, ddof=ddof)
    y = (x - mean) / (np.sqrt(var) + eps if eps_outside else np.sqrt(var + eps))
    if not affine:
        return y
    if swap:
        weight, bias = bias, weight
    return y * weight + bias


def gelu_tanh(x):
    """GPT-2's GELU: the tanh approximation (Hugging Face's "gelu_new")."""
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def gelu_exact(x):
    return 0.5 * x * (1 + np.vectorize(erf)(x / sqrt(2)))


ACTIVATIONS = {"gelu_tanh": gelu_tanh, "gelu_exact": gelu_exact,
               "relu": lambda x: np.maximum(x, 0), "none": lambda x: x}


def mlp(x, p, *, act="gelu_tanh", c_proj=True, fc_bias=True, proj_bias=True):
    """c_proj(act(c_fc(x))): [B, T, C] -> [B, T, C]; `p` holds c_fc_weight [C, 4C], c_fc_bias, c_proj_weight [4C, C],
    c_proj_bias."""
    h = ACTIVATIONS[act](x @ p["c_fc_weight"] + (p["c_fc_bias"] if fc_bias else 0))
    if not c_proj:
        return h
    return h @ p["c_proj_weight"] + (p["c_proj_bias"] if proj_bias else 0)
