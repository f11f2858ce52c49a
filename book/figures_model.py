"""The figures of the model's pages, steps 01 to 12: its shapes and structure, drawn as diagrams, and the
numbers of its parts (its parameters, a LayerNorm, the GELU, the lookups, sampling), plotted.

    attention-shapes.svg (07), causal-mask.svg (02), residual.svg (08), block.svg (09), model.svg (10, 11),
    parameters.svg (01), layer-norm.svg (03), activations.svg (04), token- and position-lookup.svg (05, 06),
    sampling.svg (12)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from book.drawing import pyplot, save
from book.examples import parameter_counts
from checker.references import gpt2_np
from checker.references.attention_np import softmax

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


def attention_shapes(path: Path) -> None:
    """Step 07: the split-attend-merge path, with the tensor shape at each stage (ATTENTION_PATH)."""
    plt = pyplot()
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
    save(fig, path)


def causal_mask(path: Path, T: int = 6, cached: int = 3) -> None:
    """Step 02: the mask of T new tokens, without cached tokens and after `cached` of them."""
    plt = pyplot()
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
    save(fig, path)


def _boxes(path: Path, boxes: list[tuple[str, str]], title: str, figsize=(6.5, 4.0)) -> None:
    """A vertical chain of labelled boxes joined by arrows: (label, note) from top to bottom."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=figsize)
    n = len(boxes)
    ax.set_xlim(0, 10)
    ax.set_ylim(-0.4, n * 1.1)
    ax.axis("off")
    for i, (label, note) in enumerate(boxes):
        y = (n - 1 - i) * 1.1
        ax.add_patch(plt.Rectangle((0.3, y), 4.4, 0.7, facecolor="#e8f0fe", edgecolor="#1a73e8"))
        ax.text(2.5, y + 0.35, label, ha="center", va="center", fontsize=10, family="monospace")
        ax.text(5.0, y + 0.35, note, va="center", fontsize=9, color="#444444")
        if i:
            ax.annotate("", xy=(2.5, y + 0.7), xytext=(2.5, y + 1.1), arrowprops={"arrowstyle": "->"})
    ax.set_title(title, fontsize=10)
    save(fig, path)


def _stream(ax, branches: list[list[str]], post_norm: str | None = None, stream_note: str = "the stream") -> None:
    """The residual stream drawn upwards at x = 1.5; each branch leaves it, runs up through its boxes and
    joins it again at a "+". With `post_norm`, that box sits on the stream after the last "+"."""
    plt = pyplot()
    line = {"color": "#666666", "linewidth": 1}
    arrow = {"arrowstyle": "->", "color": "#666666"}
    stream = {"color": "#1a73e8", "linewidth": 2.5}
    box_h, x_box = 0.8, 4.5
    ax.text(1.5, 0.0, "x", ha="center", va="center", fontsize=11, family="monospace")
    ax.text(0.6, 0.9, stream_note, rotation=90, ha="center", va="bottom", fontsize=8, color="#1a73e8")
    y = 0.3
    for boxes in branches:
        start, fork = y, y + 0.4
        ax.plot([1.5, x_box], [fork, fork], **line)
        y = fork
        for label in boxes:
            ax.annotate("", xy=(x_box, y + 0.4), xytext=(x_box, y), arrowprops=arrow)
            y += 0.4
            ax.add_patch(plt.Rectangle((x_box - 1.4, y), 2.8, box_h, facecolor="#e8f0fe", edgecolor="#1a73e8"))
            ax.text(x_box, y + box_h / 2, label, ha="center", va="center", fontsize=9, family="monospace")
            y += box_h
        plus = y + 0.4
        ax.plot([x_box, x_box], [y, plus], **line)
        ax.annotate("", xy=(1.78, plus), xytext=(x_box, plus), arrowprops=arrow)
        ax.plot([1.5, 1.5], [start, plus - 0.25], **stream)
        ax.add_patch(plt.Circle((1.5, plus), 0.25, facecolor="white", edgecolor="#1a73e8", linewidth=1.5))
        ax.text(1.5, plus, "+", ha="center", va="center", fontsize=11)
        y = plus + 0.25
    if post_norm:
        ax.plot([1.5, 1.5], [y, y + 0.3], **stream)
        ax.add_patch(plt.Rectangle((0.3, y + 0.3), 2.4, box_h, facecolor="#fde7e9", edgecolor="#c5221f"))
        ax.text(1.5, y + 0.3 + box_h / 2, post_norm, ha="center", va="center", fontsize=9, family="monospace")
        y += 0.3 + box_h
    ax.annotate("", xy=(1.5, y + 0.6), xytext=(1.5, y), arrowprops={"arrowstyle": "->", "color": "#1a73e8", "lw": 2})
    ax.text(1.5, y + 0.85, "out", ha="center", va="center", fontsize=10, family="monospace")
    ax.set_xlim(-0.2, 8.5)
    ax.set_ylim(-0.4, y + 1.1)
    ax.set_aspect("equal")
    ax.axis("off")


def residual(path: Path) -> None:
    """Step 08: where the LayerNorm sits, the original Transformer's way and GPT-2's."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(7.5, 3.3))
    _stream(axes[0], [["sublayer"]], post_norm="ln")
    axes[0].set_title("post-norm (the original Transformer)", fontsize=10)
    _stream(axes[1], [["ln", "sublayer"]])
    axes[1].set_title("pre-norm (GPT-2)", fontsize=10)
    save(fig, path)


def block(path: Path) -> None:
    """Step 09: a block is two pre-norm residual steps, attention first."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 5.6))
    _stream(ax, [["ln_1", "attn"], ["ln_2", "mlp"]], stream_note="the stream, [B, T, 768]")
    ax.text(6.1, 1.6, "attention half:\ntokens exchange", fontsize=8, color="#444444", va="center")
    ax.text(6.1, 4.5, "MLP half:\neach token alone", fontsize=8, color="#444444", va="center")
    ax.set_title("a GPT-2 block", fontsize=10)
    save(fig, path)


def model(path: Path) -> None:
    """Steps 10 and 11: the model body, its blocks in a chain, then the tied head."""
    _boxes(path, [("input_ids [B, T]", "token ids"), ("wte + wpe", "[B, T, 768]"),
                  ("h.0 ... h.11", "12 blocks, same shape"), ("ln_f", "once, at the end"),
                  ("tied head: rows of wte", "step 11: logits [B, T, 50257]")],
           "the model body, then the tied head", figsize=(6.5, 4.6))


def parameters(path: Path) -> None:
    """Step 01: where GPT-2 small's 124M parameters are."""
    plt = pyplot()
    counts = parameter_counts()
    fig, ax = plt.subplots(figsize=(7, 2.8))
    names = list(counts)
    ax.barh(names, [counts[n] / 1e6 for n in names], color="#1a73e8")
    for i, n in enumerate(names):
        ax.text(counts[n] / 1e6 + 0.5, i, f"{counts[n] / 1e6:.2f}M", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("parameters (millions)")
    ax.set_title(f"GPT-2 small: {sum(counts.values()):,} parameters", fontsize=10)
    save(fig, path)


def layer_norm(path: Path) -> None:
    """Step 03: one token's channels before and after LayerNorm (weight 1, bias 0)."""
    plt = pyplot()
    x = np.random.default_rng(3).normal(2.0, 3.0, size=48)
    y = gpt2_np.layer_norm(x, np.ones_like(x), np.zeros_like(x), 1e-5)
    fig, axes = plt.subplots(1, 2, figsize=(8, 2.6), sharey=False)
    for ax, values, title in ((axes[0], x, f"x: mean {x.mean():.2f}, std {x.std():.2f}"),
                              (axes[1], y, f"normalised: mean {y.mean():.2f}, std {y.std():.2f}")):
        ax.bar(range(len(values)), values, color="#1a73e8")
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("channel")
    save(fig, path)


def activations(path: Path) -> None:
    """Step 04: GPT-2's GELU (tanh) against the exact GELU and ReLU."""
    plt = pyplot()
    t = np.linspace(-4, 3, 300)
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.plot(t, np.maximum(t, 0), label="ReLU", color="#999999", linestyle="--")
    ax.plot(t, gpt2_np.gelu_exact(t), label="GELU, exact (erf)", color="#e8710a")
    ax.plot(t, gpt2_np.gelu_tanh(t), label="GELU, tanh: GPT-2's", color="#1a73e8", linestyle=":")
    ax.axhline(0, color="black", linewidth=0.5)
    ax.set_xlabel("x (c_fc's output)")
    ax.set_ylabel("activation")
    ax.legend(fontsize=8)
    save(fig, path)


def lookup(path: Path, picked: list[int], rows: int, what: str) -> None:
    """Steps 05 and 06: a table whose picked rows are the output."""
    plt = pyplot()
    table = np.random.default_rng(5).normal(size=(rows, 8))
    fig, ax = plt.subplots(figsize=(4.6, 3.4))
    ax.imshow(table, cmap="viridis", aspect="auto")
    for i in picked:
        ax.add_patch(plt.Rectangle((-0.5, i - 0.5), 8, 1, fill=False, edgecolor="#ff3333", linewidth=2))
    ax.set_yticks(range(rows), [str(i) for i in range(rows)], fontsize=7)
    ax.set_xticks([])
    ax.set_xlabel("channels (768 in GPT-2)")
    ax.set_ylabel(what)
    ax.set_title(f"picked rows: {picked}", fontsize=9)
    save(fig, path)


def sampling(path: Path) -> None:
    """Step 12: one set of logits, sampled at three temperatures and with top_k."""
    plt = pyplot()
    z = np.array([2.0, 1.0, 0.5, -1.0, -1.5])
    cases = {"T = 0.5": softmax(z / 0.5), "T = 1": softmax(z), "T = 2": softmax(z / 2),
             "T = 1, top_k = 2": softmax(np.where(z < np.sort(z)[-2], -np.inf, z))}
    fig, axes = plt.subplots(1, len(cases), figsize=(9, 2.6), sharey=True)
    for ax, (title, p) in zip(axes, cases.items()):
        ax.bar(range(len(z)), p, color="#1a73e8")
        ax.set_title(title, fontsize=9)
        ax.set_xticks(range(len(z)))
        ax.set_xlabel("token")
    axes[0].set_ylabel("probability")
    save(fig, path)
