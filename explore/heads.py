"""`pixi run heads "text"`: what each attention head of one layer looks at.

    python -m explore.heads "The cat sat on the mat because it was tired"
    python -m explore.heads "..." --layer 5 --out out/heads.png --solutions

One heatmap per head (query tokens down, key tokens across, colour = weight),
computed by your step 07's c_attn, _split_heads and _attn with the layer's
GPT-2 weights; each panel's title gives the head's mean entropy in nats (low:
focused on a few tokens; high: spread out). Writes the PNG, and a JSON beside
it with the weights, the settings and the largest difference from Hugging
Face's own attention weights.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

import runtime
from explore.attention import (
    OUT,
    attention_module,
    checkpoint_and_layer,
    entropy,
    layer_input,
    save,
    settings,
    step07_class,
    weights_note,
    weights_of,
)
from runtime import eager_kernels
from runtime.learner import LearnerError, call
from runtime.tokenizer import tokenizer_of

# matplotlib is imported inside the functions that use it: importing it takes seconds.


def figure(weights: np.ndarray, tokens: list[str], ent: np.ndarray, title: str):
    """A grid of H heatmaps [T, T] with token labels, and the entropy of each head in its title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    H, T = weights.shape[0], weights.shape[1]
    cols = 4 if H % 4 == 0 else min(H, 6)
    rows = -(-H // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 3.2 * rows + 0.6), squeeze=False)
    for h, ax in enumerate(axes.flat):
        if h >= H:
            ax.axis("off")
            continue
        image = ax.imshow(weights[h], cmap="viridis", vmin=0.0, vmax=1.0)
        ax.set_title(f"head {h}  H={ent[h]:.2f}", fontsize=9)
        ax.set_xticks(range(T), tokens, rotation=90, fontsize=6)
        ax.set_yticks(range(T), tokens, fontsize=6)
        ax.set_xlabel("key token", fontsize=7)
        ax.set_ylabel("query token", fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.6, label="attention weight")
    return fig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m explore.heads", description=__doc__.split("\n")[0])
    parser.add_argument("text")
    parser.add_argument("--layer", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="PNG path (default out/heads-layerN.png)")
    parser.add_argument("--solutions", action="store_true", help="use the course's step 07, not yours")
    args = parser.parse_args(argv)
    runtime.setup()
    eager_kernels.load()  # the course's eager kernels, compiled by the checks' warm-up

    if (checkpoint := checkpoint_and_layer(parser, args.layer)) is None:
        return 2

    config = checkpoint.learner_config()
    tokenizer = tokenizer_of(checkpoint)
    ids = tokenizer.encode(args.text).ids
    tokens = [tokenizer.decode([i]) for i in ids]
    x, hf_weights = layer_input(checkpoint, ids, args.layer)
    try:
        module = call(attention_module, step07_class(args.solutions), config, checkpoint, args.layer, timeout=0)
        weights = call(weights_of, module, x, config.n_head, timeout=0)
    except LearnerError as e:
        print(f"Your step 07 could not run: {e}\nCheck it first: pixi run s07", file=sys.stderr)
        return 1
    ent = entropy(weights)
    diff = float(np.abs(weights - hf_weights).max())
    source = "the course's step 07" if args.solutions else "your step 07"
    title = f"Layer {args.layer} attention, {config.n_head} heads, {source}\n{weights_note(checkpoint)}"
    out = args.out or OUT / f"heads-layer{args.layer}.png"
    data = settings(checkpoint, title=title, layer=args.layer, text=args.text, ids=ids, tokens=tokens, source=source,
                    entropy=ent.tolist(), max_abs_diff_vs_transformers=diff, weights=weights.tolist())
    save(figure(weights, tokens, ent, title), out, data)

    print(f"Weights: {checkpoint.describe()}")
    print(f"{title.replace(chr(10), '; ')}\n{len(ids)} tokens: {' | '.join(tokens)}")
    for h in np.argsort(ent):
        print(f"  head {h:2d}  entropy {ent[h]:.3f} nats  (top key of the last token: "
              f"{tokens[int(weights[h, -1].argmax())]!r})")
    print(f"max |your weights - transformers'| = {diff:.1e}")
    print(f"Wrote {out} and {out.with_suffix('.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
