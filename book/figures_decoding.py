"""The figures of the pages that make decoding fast, steps 13 to 17: the KV cache and its mask, the paged
cache a served batch writes to, the roofline a decode step is held to, and FlashAttention's online softmax
and split decode.

    kv-cache.svg, kv-cache-mask.svg (13), paged-batch.svg (14), decode-roofline.svg (15),
    online-softmax.svg, flash-decoding.svg (17)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from book.drawing import pyplot, save
from book.examples import ONLINE_SCORES, ONLINE_TILE, ONLINE_VALUES, decode_limit, online_softmax, positions_processed
from checker.references.attention_np import causal_mask as mask
from checker.references.ragged import CACHED, OFFSETS


def kv_cache_cost(path: Path, prompt: int = 10, new: int = 20) -> None:
    """Step 13: positions the model runs for each new token, and in all, without and with a cache."""
    plt = pyplot()
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
    save(fig, path)


def kv_cache_mask(path: Path, T: int = 2, P: int = 3) -> None:
    """Step 13: the [T, P+T] mask's values, its columns for the cached keys and for the new ones outlined
    (how to build it is the page's folded question, not the figure's)."""
    plt = pyplot()
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
    save(fig, path)


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
    plt = pyplot()
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
    save(fig, path)


def decode_roofline(path: Path) -> None:
    """Step 15: what a product can reach against how many flops it does per byte read (a roofline), with
    this machine's bandwidth and matmul speed measured at build time; decode's matvec and a prompt's matmul."""
    d = decode_limit()
    bw, peak = d["bandwidth"] / 1e9, d["flops"] / 1e9
    plt = pyplot()
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
    save(fig, path)


def online_softmax_row(path: Path) -> None:
    """Step 17: one query's scores, tile by tile (book.examples' row): the running maximum m after each tile,
    and the running sum l, rescaled each time m grows; the scores are never stored as a row."""
    s, v, tile = ONLINE_SCORES, ONLINE_VALUES, ONLINE_TILE
    rows = online_softmax(s, v, tile)
    plt = pyplot()
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
    save(fig, path)


def flash_decoding(path: Path, keys: int = 24, tasks: int = 3) -> None:
    """Step 17: at decode, one query per head; a head's keys split between tasks, each leaving (m, l, a),
    combined once the tasks end."""
    plt = pyplot()
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
    save(fig, path)
