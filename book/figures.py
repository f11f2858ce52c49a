"""The book's figures, drawn with matplotlib at build time (book/hooks.py).

    attention-shapes.svg   step 07's split-attend-merge path, with the tensor shape at each stage
    causal-mask.svg        step 02's mask, without and with cached tokens
    FIGURES                one more per step: parameters (01), layer-norm (03), activations (04),
                           token- and position-lookup (05, 06), residual (08), block (09),
                           model (10, 11), sampling (12), kv-cache and kv-cache-mask (13),
                           paged-batch (14), decode-roofline (15), online-softmax and
                           flash-decoding (17)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from book.examples import (
    ONLINE_SCORES,
    ONLINE_TILE,
    ONLINE_VALUES,
    decode_limit,
    online_softmax,
    parameter_counts,
    positions_processed,
)
from checker.references import gpt2_np
from checker.references.attention_np import causal_mask as mask
from checker.references.attention_np import softmax
from checker.references.ragged import CACHED, OFFSETS

# matplotlib is imported inside the functions that use it: importing it takes seconds.

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


def _save(fig, path: Path) -> None:
    """Lays the figure out, writes it to `path` and frees it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


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
    _save(fig, path)


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
    _save(fig, path)




def _boxes(path: Path, boxes: list[tuple[str, str]], title: str, figsize=(6.5, 4.0)) -> None:
    """A vertical chain of labelled boxes joined by arrows: (label, note) from top to bottom."""
    plt = _pyplot()
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
    _save(fig, path)


def _stream(ax, branches: list[list[str]], post_norm: str | None = None, stream_note: str = "the stream") -> None:
    """The residual stream drawn upwards at x = 1.5; each branch leaves it, runs up through its boxes and
    joins it again at a "+". With `post_norm`, that box sits on the stream after the last "+"."""
    plt = _pyplot()
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
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(7.5, 3.3))
    _stream(axes[0], [["sublayer"]], post_norm="ln")
    axes[0].set_title("post-norm (the original Transformer)", fontsize=10)
    _stream(axes[1], [["ln", "sublayer"]])
    axes[1].set_title("pre-norm (GPT-2)", fontsize=10)
    _save(fig, path)


def block(path: Path) -> None:
    """Step 09: a block is two pre-norm residual steps, attention first."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 5.6))
    _stream(ax, [["ln_1", "attn"], ["ln_2", "mlp"]], stream_note="the stream, [B, T, 768]")
    ax.text(6.1, 1.6, "attention half:\ntokens exchange", fontsize=8, color="#444444", va="center")
    ax.text(6.1, 4.5, "MLP half:\neach token alone", fontsize=8, color="#444444", va="center")
    ax.set_title("a GPT-2 block", fontsize=10)
    _save(fig, path)


def parameters(path: Path) -> None:
    """Step 01: where GPT-2 small's 124M parameters are."""
    plt = _pyplot()
    counts = parameter_counts()
    fig, ax = plt.subplots(figsize=(7, 2.8))
    names = list(counts)
    ax.barh(names, [counts[n] / 1e6 for n in names], color="#1a73e8")
    for i, n in enumerate(names):
        ax.text(counts[n] / 1e6 + 0.5, i, f"{counts[n] / 1e6:.2f}M", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("parameters (millions)")
    ax.set_title(f"GPT-2 small: {sum(counts.values()):,} parameters", fontsize=10)
    _save(fig, path)


def layer_norm(path: Path) -> None:
    """Step 03: one token's channels before and after LayerNorm (weight 1, bias 0)."""
    plt = _pyplot()
    x = np.random.default_rng(3).normal(2.0, 3.0, size=48)
    y = gpt2_np.layer_norm(x, np.ones_like(x), np.zeros_like(x), 1e-5)
    fig, axes = plt.subplots(1, 2, figsize=(8, 2.6), sharey=False)
    for ax, values, title in ((axes[0], x, f"x: mean {x.mean():.2f}, std {x.std():.2f}"),
                              (axes[1], y, f"normalised: mean {y.mean():.2f}, std {y.std():.2f}")):
        ax.bar(range(len(values)), values, color="#1a73e8")
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("channel")
    _save(fig, path)


def activations(path: Path) -> None:
    """Step 04: GPT-2's GELU (tanh) against the exact GELU and ReLU."""
    plt = _pyplot()
    t = np.linspace(-4, 3, 300)
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.plot(t, np.maximum(t, 0), label="ReLU", color="#999999", linestyle="--")
    ax.plot(t, gpt2_np.gelu_exact(t), label="GELU, exact (erf)", color="#e8710a")
    ax.plot(t, gpt2_np.gelu_tanh(t), label="GELU, tanh: GPT-2's", color="#1a73e8", linestyle=":")
    ax.axhline(0, color="black", linewidth=0.5)
    ax.set_xlabel("x (c_fc's output)")
    ax.set_ylabel("activation")
    ax.legend(fontsize=8)
    _save(fig, path)


def lookup(path: Path, picked: list[int], rows: int, what: str) -> None:
    """Steps 05 and 06: a table whose picked rows are the output."""
    plt = _pyplot()
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
    _save(fig, path)


def sampling(path: Path) -> None:
    """Step 12: one set of logits, sampled at three temperatures and with top_k."""
    plt = _pyplot()
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
    _save(fig, path)


def kv_cache_cost(path: Path, prompt: int = 10, new: int = 20) -> None:
    """Step 13: positions the model runs for each new token, and in all, without and with a cache."""
    plt = _pyplot()
    without, with_cache = positions_processed(prompt, new)
    steps = np.arange(1, new + 1)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    axes[0].bar(steps - 0.2, without, width=0.4, color="#999999", label="without cache (step 12)")
    axes[0].bar(steps + 0.2, with_cache, width=0.4, color="#1a73e8", label="with cache (step 13)")
    axes[0].set_xlabel("new token")
    axes[0].set_ylabel("positions run")
    axes[0].set_title(f"per token: {prompt} + i without, {prompt} then 1 with", fontsize=9)
    axes[0].set_xticks([1, 5, 10, 15, 20])
    axes[0].legend(fontsize=8)
    for values, color, label in ((without, "#999999", "without: T*n + n(n-1)/2"),
                                   (with_cache, "#1a73e8", "with: T + n - 1")):
        total = np.cumsum(values)
        axes[1].plot(steps, total, color=color, marker="o", markersize=3, label=label)
        axes[1].annotate(f"{total[-1]}", (steps[-1], total[-1]), textcoords="offset points", xytext=(-6, 2),
                         ha="right", va="bottom", fontsize=9, color=color)
    axes[1].set_ylim(0, max(np.cumsum(without)) * 1.15)
    axes[1].set_xlabel("new tokens n")
    axes[1].set_ylabel("positions run in all")
    axes[1].set_title(f"in all, for a {prompt}-token prompt (T = {prompt})", fontsize=9)
    axes[1].set_xticks([1, 5, 10, 15, 20])
    axes[1].legend(fontsize=8)
    _save(fig, path)


def kv_cache_mask(path: Path, T: int = 2, P: int = 3) -> None:
    """Step 13: the [T, P+T] mask's values, its columns for the cached keys and for the new ones outlined
    (how to build it is the page's folded question, not the figure's)."""
    plt = _pyplot()
    full = np.concatenate([np.zeros((T, P)), mask(T, 0)], axis=1)
    fig, ax = plt.subplots(figsize=(5.5, 2.7))
    ax.imshow(full == 0, cmap="Greys_r", vmin=-0.4, vmax=1)
    for (i, j), value in np.ndenumerate(full):
        ax.text(j, i, "0" if value == 0 else "-inf", ha="center", va="center", fontsize=9,
                color="black" if value == 0 else "white")
    for x0, width, color, label in ((0, P, "#1a73e8", "the cached keys"), (P, T, "#e8710a", "the new keys")):
        ax.add_patch(plt.Rectangle((x0 - 0.46, -0.46), width - 0.08, T - 0.08, fill=False, edgecolor=color,
                                   linewidth=2.5))
        ax.text(x0 + width / 2 - 0.5, T - 0.35, label, ha="center", va="top", fontsize=8, color=color)
    ax.set_xticks(range(P + T), [f"c{j}" for j in range(P)] + [f"n{j}" for j in range(T)], fontsize=8)
    ax.set_yticks(range(T), [f"new {i}" for i in range(T)], fontsize=8)
    ax.set_ylim(T + 0.4, -0.5)
    ax.set_xlabel("key (c: cached, n: new)")
    ax.set_title(f"the mask for P = {P} cached, T = {T} new: [{T}, {P + T}] = causal_mask({T}, {P})", fontsize=9)
    _save(fig, path)


def page_tables(lengths: list[int], page: int) -> list[list[int]]:
    """Each request's pages when the pool hands out one page at a time, to each request in turn as it
    grows: request b's positions p live in page tables[b][p // page], slot p % page."""
    need = [-(-n // page) for n in lengths]
    tables, free = [[] for _ in lengths], 0
    while any(len(t) < n for t, n in zip(tables, need)):
        for t, n in zip(tables, need):
            if len(t) < n:
                t.append(free)
                free += 1
    return tables


def paged_batch(path: Path, page: int = 4) -> None:
    """Step 14: the worked example's ragged batch (rows by request) over the paged cache, each request's
    cached positions and the slots its new rows are written to (positions themselves are the exercise)."""
    plt = _pyplot()
    colors = ["#1a73e8", "#e8710a", "#188038", "#a142f4"]
    new = np.diff(OFFSETS).tolist()
    tables = page_tables([int(c) + n for c, n in zip(CACHED, new)], page)
    pages = sum(map(len, tables))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 4.6), gridspec_kw={"height_ratios": [1, 2.1]})
    for ax in (top, bottom):
        ax.axis("off")
    top.set_xlim(-0.5, OFFSETS[-1] + 0.5)
    top.set_ylim(-0.9, 1.6)
    for b in range(len(new)):
        for row in range(int(OFFSETS[b]), int(OFFSETS[b + 1])):
            top.add_patch(plt.Rectangle((row - 0.45, 0), 0.9, 0.9, facecolor=colors[b], alpha=0.85))
            top.text(row, 0.45, str(row), ha="center", va="center", color="white", fontsize=9)
        kind = "prompt" if CACHED[b] == 0 else f"decode, {CACHED[b]} cached"
        top.text((OFFSETS[b] + OFFSETS[b + 1] - 1) / 2, 1.05, f"request {b}\n({kind})", ha="center",
                 va="bottom", fontsize=8, color=colors[b])
    for x in OFFSETS:
        top.plot([x - 0.5, x - 0.5], [-0.15, 1.0], color="black", linewidth=1)
    top.text(-0.5, -0.55, f"the ragged batch: {int(OFFSETS[-1])} rows of tokens; input_row_offsets = "
             f"{OFFSETS.tolist()}, cache_lengths = {CACHED.tolist()}", fontsize=9)
    bottom.set_xlim(-0.5, pages * (page + 0.6))
    bottom.set_ylim(-1.5, 1.8)
    bottom.text(-0.5, 1.45, "the paged KV cache, one layer's keys (its values alike): the pool's pages, each "
                "request's page table below", fontsize=9)
    owner = {p: b for b, t in enumerate(tables) for p in t}
    for p in range(pages):
        b = owner[p]
        x0 = p * (page + 0.6)
        bottom.text(x0 + page / 2 - 0.5, 1.1, f"page {p}", ha="center", fontsize=8)
        for slot in range(page):
            pos = tables[b].index(p) * page + slot
            cached, written = pos < CACHED[b], CACHED[b] <= pos < CACHED[b] + new[b]
            bottom.add_patch(plt.Rectangle((x0 + slot - 0.45, 0), 0.9, 0.9, edgecolor=colors[b],
                                           facecolor=colors[b] if cached else "white",
                                           hatch="///" if written else None, alpha=0.85 if cached else 1))
    for b, t in enumerate(tables):
        bottom.text(-0.5, -0.5 - 0.3 * b, f"request {b}: pages {t}", fontsize=8, color=colors[b])
    bottom.text(pages * (page + 0.6) * 0.45, -0.8, f"pages of {page} slots: filled = cached keys/values, "
                "hatched = where this batch's\nrows are written (store_k/v_cache_ragged), white = free",
                fontsize=8)
    _save(fig, path)


def decode_roofline(path: Path) -> None:
    """Step 15: what a product can reach against how many flops it does per byte read (a roofline), with
    this machine's bandwidth and matmul speed measured at build time; decode's matvec and a prompt's matmul."""
    d = decode_limit()
    bw, peak = d["bandwidth"] / 1e9, d["flops"] / 1e9
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    intensity = np.logspace(-2, 3, 200)  # flops per byte
    ax.loglog(intensity, np.minimum(bw * intensity, peak), color="black")
    ax.annotate(f"memory: {bw:.0f} GB/s x flops/byte", (0.08, bw * 0.08), xytext=(0.2, bw * 0.08 / 6), fontsize=8,
                arrowprops=dict(arrowstyle="-", lw=0.6))  # below the slanted line, pointing at it
    ax.text(200, peak * 1.15, f"compute: {peak:.0f} GFLOP/s", fontsize=8, ha="center")
    for x, label, color in ((0.5, "decode: y = W x\n2 flops per 4-byte weight", "#d93025"),
                            (64.0, "a 128-token prompt: Y = X W\u1d40\n128 rows share each weight", "#1a73e8")):
        y = min(bw * x, peak)
        ax.plot([x], [y], "o", color=color)
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(8, -28), fontsize=8, color=color)
    ax.set_xlabel("flops per byte of weights read")
    ax.set_ylabel("GFLOP/s at best")
    ax.set_title("measured on the machine that built this page", fontsize=9)
    _save(fig, path)


def online_softmax_row(path: Path) -> None:
    """Step 17: one query's scores, tile by tile (book.examples' row): the running maximum m after each tile,
    and the running sum l, rescaled each time m grows; the scores are never stored as a row."""
    s, v, tile = ONLINE_SCORES, ONLINE_VALUES, ONLINE_TILE
    rows = online_softmax(s, v, tile)
    plt = _pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 4.6), sharex=True, height_ratios=[3, 2])
    colors = ["#1a73e8", "#e8710a", "#188038"]
    for i, r in enumerate(rows):
        first, last = r["keys"]
        keys = np.arange(first, last + 1)
        top.bar(keys, s[keys], color=colors[i % 3], label=f"tile {i + 1}: keys {first}..{last}")
        top.hlines(r["m"], first - 0.45, last + 0.45, color="black", linewidth=2)
        top.text(first - 0.4, r["m"] + 0.12, f"m = {r['m']:.1f}", va="bottom", fontsize=8)
        bottom.bar(keys.mean(), r["l"], width=len(keys) - 0.1, color=colors[i % 3], alpha=0.8)
        said = f"l = {r['l']:.3f}" + (f"\n(what came before x {r['factor']:.3f})" if 0 < r["factor"] < 1 else "")
        bottom.text(keys.mean(), r["l"] + 0.1, said, ha="center", va="bottom", fontsize=8)
    top.axhline(0, color="#999999", linewidth=0.6)
    top.set_ylabel("score q . k / sqrt(D)")
    top.set_ylim(s.min() - 0.3, s.max() + 0.8)
    top.set_title("one query, its keys in tiles of 3: the running maximum m (black) after each tile", fontsize=9)
    top.legend(fontsize=7, loc="lower right")
    bottom.set_ylim(0, max(r["l"] for r in rows) * 1.6)
    bottom.set_ylabel("running sum l")
    bottom.set_xlabel("key")
    bottom.set_xticks(range(len(s)))
    _save(fig, path)


def flash_decoding(path: Path, keys: int = 24, tasks: int = 3) -> None:
    """Step 17: at decode, one query per head; a head's keys split between tasks, each leaving (m, l, a),
    combined once the tasks end."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 2.6))
    per = -(-keys // tasks)
    colors = ["#1a73e8", "#e8710a", "#188038", "#a142f4"]
    for t in range(tasks):
        first, last = t * per, min((t + 1) * per, keys)
        ax.add_patch(plt.Rectangle((first, 1.2), last - first - 0.1, 0.8, color=colors[t % 4], alpha=0.85))
        ax.text((first + last) / 2, 1.6, f"task {t + 1}: keys {first}..{last - 1}", ha="center", va="center",
                fontsize=8, color="white")
        ax.annotate("", ((first + last) / 2, 0.75), xytext=((first + last) / 2, 1.15),
                    arrowprops=dict(arrowstyle="->", lw=0.8))
        ax.text((first + last) / 2, 0.6, f"(m{t + 1}, l{t + 1}, a{t + 1})", ha="center", va="top", fontsize=8)
    ax.text(keys / 2, 0.05, "m = max m_s;   out = sum a_s exp(m_s - m) / sum l_s exp(m_s - m)", ha="center",
            fontsize=9)
    ax.set_xlim(-0.5, keys + 0.5)
    ax.set_ylim(-0.2, 2.3)
    ax.axis("off")
    ax.set_title(f"a decode step, one head: its {keys} keys split between {tasks} tasks, combined exactly",
                 fontsize=9)
    _save(fig, path)


FIGURES = {
    "parameters.svg": parameters,
    "layer-norm.svg": layer_norm,
    "activations.svg": activations,
    "token-lookup.svg": lambda p: lookup(p, [2, 0, 4, 2], 6, "token id"),
    "position-lookup.svg": lambda p: lookup(p, [2, 3, 4], 8, "position"),
    "residual.svg": residual,
    "block.svg": block,
    "model.svg": lambda p: _boxes(p, [("input_ids [B, T]", "token ids"), ("wte + wpe", "[B, T, 768]"),
                                      ("h.0 ... h.11", "12 blocks, same shape"), ("ln_f", "once, at the end"),
                                      ("tied head: rows of wte", "step 11: logits [B, T, 50257]")],
                                  "the model body, then the tied head", figsize=(6.5, 4.6)),
    "sampling.svg": sampling,
    "kv-cache.svg": kv_cache_cost,
    "kv-cache-mask.svg": kv_cache_mask,
    "paged-batch.svg": paged_batch,
    "decode-roofline.svg": decode_roofline,
    "online-softmax.svg": online_softmax_row,
    "flash-decoding.svg": flash_decoding,
}


def draw_all(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    attention_shapes(folder / "attention-shapes.svg")
    causal_mask(folder / "causal-mask.svg")
    for name, draw in FIGURES.items():
        draw(folder / name)
