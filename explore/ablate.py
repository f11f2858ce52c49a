"""`pixi run ablate`: which heads of one layer the model needs, measured by its loss.

    python -m explore.ablate                      layer 0, on explore/data/ablation.txt
    python -m explore.ablate --layer 5 --solutions --out out/ablate.png

Runs your GPT2LMHeadModel (steps 01-11, loaded by your load_hf_weights) on a
short text and measures the next-token loss (mean cross-entropy, nats). Then
zeroes one head at a time: its rows of c_proj's weight, which is the same as
zeroing that head's output. Reports the change in loss per head, ranked, as a
bar chart; and removes heads cumulatively, least harmful first, to count how
many can go before the loss rises by more than 1%.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

import runtime
from explore.attention import OUT, checkpoint_and_layer, save, settings, weights_note
from runtime import eager_kernels
from runtime.learner import LearnerError, call, import_step
from runtime.loading import stored_tensors
from runtime.paths import step_file
from runtime.tokenizer import tokenizer_of

# MAX and matplotlib are imported inside the functions that use them: importing them takes seconds.

TEXT = Path(__file__).parent / "data" / "ablation.txt"
RISE = 0.01  # "removable" while the loss stays within 1% of the full model's


def next_token_loss(logits: np.ndarray, ids: list[int]) -> float:
    """Mean cross-entropy of predicting ids[1:] from logits [T, V] at positions 0..T-2."""
    z = logits[:-1].astype(np.float64)
    z = z - z.max(-1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return float(-log_p[np.arange(len(ids) - 1), ids[1:]].mean())


class Ablation:
    """The learner's model with GPT-2 loaded, whose layer-`layer` heads can be switched off."""

    def __init__(self, model_cls, load_hf_weights, checkpoint, layer: int):
        from max.experimental import functional as F

        self.tensors = stored_tensors(checkpoint)
        self.name = f"transformer.h.{layer}.attn.c_proj.weight"  # Conv1D: [in, out]; head h owns rows h*D..
        config = checkpoint.learner_config()
        self.D = config.n_embd // config.n_head
        with F.lazy():
            self.model = model_cls(config)
        self.load = load_hf_weights

    def loss(self, ids: list[int], off: set[int]) -> float:
        """The loss with the heads in `off` zeroed."""
        from max.experimental.tensor import Tensor

        tensors = dict(self.tensors)
        w = tensors[self.name].copy()
        for h in off:
            w[h * self.D:(h + 1) * self.D] = 0.0
        tensors[self.name] = w
        self.load(self.model, tensors)
        logits = np.from_dlpack(self.model(Tensor.from_dlpack(np.array([ids], dtype=np.int64))))[0]
        return next_token_loss(logits, ids)


def run(ablation: Ablation, ids: list[int], H: int) -> dict:
    """Baseline, each head alone, and the cumulative removal; the numbers behind the figure."""
    base = ablation.loss(ids, set())
    alone = {h: ablation.loss(ids, {h}) - base for h in range(H)}
    ranked = sorted(alone, key=alone.get)  # least harmful first
    removed, curve = [], []
    for h in ranked:
        loss = ablation.loss(ids, {*removed, h})
        curve.append(loss)
        if loss > base * (1 + RISE):
            break
        removed.append(h)
    return {"baseline_loss": base, "delta_loss": [alone[h] for h in range(H)], "ranked_heads": ranked,
            "cumulative_loss": curve, "removable_within_1pct": len(removed), "removed_heads": removed}


def figure(result: dict, title: str):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ranked, delta = result["ranked_heads"], result["delta_loss"]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.bar([str(h) for h in ranked[::-1]], [delta[h] for h in ranked[::-1]], color="tab:blue")
    ax.axhline(RISE * result["baseline_loss"], color="tab:red", linestyle="--", label="1% of the loss")
    ax.set_xlabel("head (most harmful to remove first)")
    ax.set_ylabel("loss change when removed alone (nats)")
    ax.set_title(title, fontsize=9)
    ax.legend()
    fig.tight_layout()
    return fig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m explore.ablate", description=__doc__.split("\n")[0])
    parser.add_argument("--layer", type=int, default=0)
    parser.add_argument("--text", type=Path, default=TEXT, help="text to measure the loss on")
    parser.add_argument("--out", type=Path, default=None, help="PNG path (default out/ablate-layerN.png)")
    parser.add_argument("--solutions", action="store_true", help="use the course's steps, not yours")
    args = parser.parse_args(argv)
    runtime.setup()
    eager_kernels.load()  # the course's eager kernels, compiled by the checks' warm-up

    if (checkpoint := checkpoint_and_layer(parser, args.layer)) is None:
        return 2

    config = checkpoint.learner_config()
    ids = tokenizer_of(checkpoint).encode(args.text.read_text()).ids[: config.n_positions]
    try:
        eleven = import_step(step_file("11", solution=args.solutions), "_ablate_step11")
        ablation = call(Ablation, eleven.GPT2LMHeadModel, eleven.load_hf_weights, checkpoint, args.layer, timeout=0)
        result = call(run, ablation, ids, config.n_head, timeout=0)
    except LearnerError as e:
        print(f"Your model could not run: {e}\nCheck it first: pixi run s11", file=sys.stderr)
        return 1
    source = "the course's steps" if args.solutions else "your steps"
    title = (f"Layer {args.layer}: loss change per head removed ({len(ids)} tokens of {args.text.name})\n"
             f"{source}; {weights_note(checkpoint)}")
    out = args.out or OUT / f"ablate-layer{args.layer}.png"
    save(figure(result, title), out, settings(checkpoint, title=title, layer=args.layer, text_file=args.text.name,
                                              tokens=len(ids), source=source, **result))

    print(f"Weights: {checkpoint.describe()}")
    print(f"Layer {args.layer}, {len(ids)} tokens; loss with every head: {result['baseline_loss']:.4f} nats")
    for rank, h in enumerate(result["ranked_heads"][::-1], 1):
        print(f"  {rank:2d}. head {h:2d}  loss {result['delta_loss'][h]:+.4f}")
    n = result["removable_within_1pct"]
    print(f"{n} of {config.n_head} heads can be removed together (least harmful first: "
          f"{result['removed_heads']}) before the loss rises by more than {RISE:.0%}.")
    print(f"Wrote {out} and {out.with_suffix('.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
