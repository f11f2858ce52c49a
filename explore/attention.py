"""Attention weights out of a learner's step 07, without changing its API.

`_attn(q, k, v)` returns softmax(q k^T / sqrt(D) + mask) v. With v set to
one-hot columns (v[key j] = e_j), that product is the attention weights
themselves. D stays the head size, so an `_attn` that takes its scale from
v's shape still scales right; keys are sent D at a time.

Shapes: T tokens, C = n_embd, H heads, D = C / H.
"""

from __future__ import annotations

import json
import platform
from importlib.metadata import version
from pathlib import Path

import numpy as np

from runtime.checkpoints import checkpoint_for_command
from runtime.hf import load_hf_model
from runtime.learner import import_step
from runtime.loading import hf_state
from runtime.paths import step_file
from runtime.standins import SEED

# MAX and torch are imported inside the functions that use them: importing them takes seconds.

OUT = Path("out")  # where figures and their JSON go by default (relative to the current folder)


def checkpoint_and_layer(parser, layer: int):
    """The checkpoint for an exploration and a check of its --layer; None if there is no usable checkpoint."""
    checkpoint = checkpoint_for_command()
    if checkpoint is not None and not 0 <= layer < checkpoint.learner_config().n_layer:
        parser.error(f"--layer must be 0..{checkpoint.learner_config().n_layer - 1}")
    return checkpoint


def weights_note(checkpoint) -> str:
    """How a figure's title names its weights."""
    return "GPT-2" if checkpoint.is_real else "SYNTHETIC checkpoint (random weights, offline stand-in)"


def step07_class(solutions: bool):
    """GPT2MultiHeadAttention from the learner's step 07 (or the solution)."""
    return import_step(step_file("07", solution=solutions), "_explore_step07").GPT2MultiHeadAttention


def attention_module(cls, config, checkpoint, layer: int):
    """`cls(config)` with block `layer`'s attention weights loaded."""
    from max.experimental import functional as F

    with F.lazy():
        module = cls(config)
    module.load_state_dict(hf_state(checkpoint, f"transformer.h.{layer}.attn.",
                                    ["c_attn.weight", "c_attn.bias", "c_proj.weight", "c_proj.bias"]))
    return module


def layer_input(checkpoint, ids: list[int], layer: int) -> tuple[np.ndarray, np.ndarray]:
    """Hugging Face's ln_1 output at `layer` [1, T, C], and its attention weights there [H, T, T]."""
    import torch

    model = load_hf_model(checkpoint)
    seen = {}
    hook = model.transformer.h[layer].ln_1.register_forward_hook(lambda m, i, o: seen.update(x=o))
    out = model(torch.tensor([ids]), output_attentions=True)
    hook.remove()
    return seen["x"].numpy(), out.attentions[layer][0].numpy()


def weights_of(module, x: np.ndarray, H: int) -> np.ndarray:
    """The attention weights [H, T, T] of `module` (the learner's) on its input x [1, T, C]."""
    from max.experimental import functional as F
    from max.experimental.tensor import Tensor

    C, T = x.shape[-1], x.shape[1]
    D = C // H
    query, key, _ = F.split(module.c_attn(Tensor.from_dlpack(np.ascontiguousarray(x, np.float32))), [C, C, C], axis=-1)
    q, k = (module._split_heads(t, H, D) for t in (query, key))
    out = np.zeros((H, T, T))
    for start in range(0, T, D):  # one-hot values for keys start .. start + D - 1
        v = np.zeros((1, H, T, D), dtype=np.float32)
        for j in range(start, min(start + D, T)):
            v[0, :, j, j - start] = 1.0
        part = np.from_dlpack(module._attn(q, k, Tensor.from_dlpack(v)))[0]  # [H, T, D]
        out[:, :, start:start + D] = part[:, :, :min(D, T - start)]
    return out


def entropy(weights: np.ndarray) -> np.ndarray:
    """Mean entropy (nats) of each head's attention rows: [H, T, T] -> [H]."""
    p = np.clip(weights, 1e-12, 1.0)
    return -(weights * np.log(p)).sum(-1).mean(-1)


def settings(checkpoint, **extra) -> dict:
    """What a figure's JSON records so a learner can cite and reproduce it."""
    return {
        "checkpoint": checkpoint.describe(),
        "real_gpt2": checkpoint.is_real,
        "seed": None if checkpoint.is_real else SEED,
        "versions": {p: version(p) for p in ("max", "transformers", "torch", "numpy", "matplotlib")},
        "python": platform.python_version(),
        **extra,
    }


def save(fig, path: Path, data: dict) -> Path:
    """Writes the figure as PNG and `data` as JSON beside it; returns the PNG's path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    path.with_suffix(".json").write_text(json.dumps(data, indent=1))
    return path
