"""The book's figures, drawn with matplotlib at build time (book/hooks.py).

    attention-shapes.svg   step 07's split-attend-merge path, with the tensor shape at each stage
    causal-mask.svg        step 02's mask, without and with cached tokens
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

# (label, shape, note) for each stage of step 07; the shapes are GPT-2 small's with B sequences of T tokens.
ATTENTION_PATH = [
    ("hidden_states", "[B, T, 768]", "the block's ln_1 output"),
    ("split q, k, v", "3 x [B, T, 768]", "c_attn, then F.split"),
    ("_split_heads (reshape)", "[B, T, 12, 64]", "each head owns 64 channels"),
    ("_split_heads (transpose)", "[B, 12, T, 64]", "heads in front of tokens"),
    ("q @ k^T / sqrt(64) + mask, softmax", "[B, 12, T, T]", "one weight per (query, key)"),
    ("weights @ v", "[B, 12, T, 64]", "per head"),
    ("_merge_heads", "[B, T, 768]", "transpose back, reshape"),
    ("c_proj", "[B, T, 768]", "mixes the heads"),
]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def attention_shapes(path: Path) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 6.2))
    ax.set_xlim(0, 10)
    ax.set_ylim(-0.5, len(ATTENTION_PATH) * 1.2)
    ax.axis("off")
    for i, (label, shape, note) in enumerate(ATTENTION_PATH):
        y = (len(ATTENTION_PATH) - 1 - i) * 1.2
        ax.add_patch(plt.Rectangle((0.2, y), 4.6, 0.8, facecolor="#e8f0fe", edgecolor="#1a73e8"))
        ax.text(2.5, y + 0.4, label, ha="center", va="center", fontsize=10)
        ax.text(5.1, y + 0.48, shape, va="center", fontsize=11, family="monospace", weight="bold")
        ax.text(5.1, y + 0.12, note, va="center", fontsize=8, color="#555555")
        if i:
            ax.annotate("", xy=(2.5, y + 0.8), xytext=(2.5, y + 1.2), arrowprops={"arrowstyle": "->"})
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def causal_mask(path: Path, T: int = 6, cached: int = 3) -> None:
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.6), gridspec_kw={"width_ratios": [T, T + cached]})
    for ax, n in zip(axes, (0, cached)):
        q, k = np.indices((T, n + T))
        allowed = k <= n + q
        ax.imshow(allowed, cmap="Greys_r", vmin=-0.4, vmax=1)
        for (i, j), ok in np.ndenumerate(allowed):
            ax.text(j, i, "0" if ok else "-inf", ha="center", va="center", fontsize=7,
                    color="black" if ok else "white")
        ax.set_xticks(range(n + T), [f"c{j}" if j < n else str(j - n) for j in range(n + T)], fontsize=7)
        ax.set_yticks(range(T), [str(i) for i in range(T)], fontsize=7)
        ax.set_xlabel("key" + (" (c: cached)" if n else ""))
        ax.set_ylabel("query")
        ax.set_title(f"causal_mask({T}, {n})  [{T}, {n + T}]", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def draw_all(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    attention_shapes(folder / "attention-shapes.svg")
    causal_mask(folder / "causal-mask.svg")
