"""`pixi run s07 --explore` (python -m explore.equivalence): three facts about multi-head attention, shown on
your step 07.

1. Parameters: c_attn + c_proj hold 4 d^2 + 4 d numbers (d = n_embd), whatever
   the number of heads: splitting into heads reshapes, it adds no weights.
2. One head: with n_head = 1, your module equals plain single-head attention
   followed by c_proj.
3. Loops: attention written as explicit loops over sequences, heads, queries
   and keys (the scalar style of minimal GPT implementations) equals the
   vectorised reshape/transpose version, and your module.

Shapes: B sequences, T tokens, d = C = n_embd, H heads, D = C / H.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
from pathlib import Path

import numpy as np

import runtime
from checker.references import attention_np
from checker.references.reference import activations
from explore.attention import attention_module, checkpoint_and_layer, settings
from runtime import eager_kernels
from runtime.learner import LearnerError, call, import_step
from runtime.paths import REPO, shown, step_file

# MAX is imported inside the functions that use it: importing it takes seconds.

SINGLE_HEAD_TOL = 1e-5
LOOP_TOL = 1e-10  # float64 against float64


def head_counts(d: int) -> list[int]:
    """Every number of heads that divides the width d (18 of them for 768)."""
    return [h for h in range(1, d + 1) if d % h == 0]


def parameter_count(cls, config, n_head: int) -> int:
    """The numbers in c_attn and c_proj of `cls(config with n_head)`."""
    from max.experimental import functional as F

    config = copy.copy(config)
    config.n_head = n_head
    with F.lazy():
        module = cls(config)
    return sum(math.prod(int(d) for d in t.shape) for name, t in module.parameters
               if name.startswith(("c_attn.", "c_proj.")))


def single_head(x: np.ndarray, p: dict[str, np.ndarray]) -> np.ndarray:
    """Plain attention with one head of size C, then c_proj: [B, T, C] -> [B, T, C]."""
    q, k, v = np.split(x @ p["c_attn_weight"] + p["c_attn_bias"], 3, axis=-1)
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(x.shape[-1])
    T = x.shape[1]
    scores = np.where(np.triu(np.ones((T, T), dtype=bool), 1), -np.inf, scores)
    return attention_np.softmax(scores) @ v @ p["c_proj_weight"] + p["c_proj_bias"]


def looped(x: np.ndarray, p: dict[str, np.ndarray], H: int) -> np.ndarray:
    """The whole layer with explicit loops and scalars: no reshape, no transpose."""
    B, T, C = x.shape
    D = C // H
    qkv = x @ p["c_attn_weight"] + p["c_attn_bias"]
    merged = np.zeros((B, T, C))
    for b in range(B):
        for h in range(H):
            cols = slice(h * D, (h + 1) * D)  # this head's channels of q, k and v
            q, k, v = qkv[b, :, cols], qkv[b, :, C:][:, cols], qkv[b, :, 2 * C:][:, cols]
            for i in range(T):
                scores = [sum(q[i, e] * k[j, e] for e in range(D)) / math.sqrt(D) for j in range(i + 1)]
                top = max(scores)
                w = [math.exp(s - top) for s in scores]
                total = sum(w)
                for e in range(D):
                    merged[b, i, h * D + e] = sum(w[j] / total * v[j, e] for j in range(i + 1))
    return merged @ p["c_proj_weight"] + p["c_proj_bias"]


def _module_output(cls, config, checkpoint, layer: int, x: np.ndarray) -> np.ndarray:
    from max.experimental.tensor import Tensor

    module = attention_module(cls, config, checkpoint, layer)
    return np.from_dlpack(module(Tensor.from_dlpack(np.ascontiguousarray(x, np.float32)))).astype(np.float64)


def explore(cls, checkpoint, refs: dict[str, np.ndarray], layer: int) -> tuple[bool, list[str], dict]:
    """Runs the three demonstrations on `cls` (a GPT2MultiHeadAttention); (all hold, lines to print, the numbers)."""
    config = checkpoint.learner_config()
    d, H = config.n_embd, config.n_head
    lines, ok = [], True

    counts = {h: parameter_count(cls, config, h) for h in head_counts(d)}
    formula = 4 * d * d + 4 * d
    same = set(counts.values()) == {formula}
    ok &= same
    lines.append(f"1. parameters of c_attn + c_proj: {counts[H]:,} = 4*{d}^2 + 4*{d} = {formula:,}: "
                 f"{'yes' if counts[H] == formula else 'NO'}")
    lines.append(f"   the same for all {len(counts)} head counts that divide {d} ({', '.join(map(str, counts))})"
                 if same
                 else "   NOT the same for every head count: " + ", ".join(f"{h}: {n:,}" for h, n in counts.items()))

    x = refs["ln_1"].astype(np.float64)  # [B, T, C], block `layer`'s real attention input
    p = {k: refs[k].astype(np.float64) for k in ("c_attn_weight", "c_attn_bias", "c_proj_weight", "c_proj_bias")}
    one = copy.copy(config)
    one.n_head = 1
    diff1 = float(np.abs(_module_output(cls, one, checkpoint, layer, x) - single_head(x, p)).max())
    ok &= diff1 <= SINGLE_HEAD_TOL
    lines.append(f"2. n_head = 1: your module vs plain single-head attention + c_proj: max|diff| {diff1:.1e} "
                 f"({'<=' if diff1 <= SINGLE_HEAD_TOL else '>'} {SINGLE_HEAD_TOL:.0e})")

    small = x[:1, :6]  # loops are slow: one sequence, 6 tokens
    loop = looped(small, p, H)
    vec = attention_np.forward(small, p, H)
    yours = _module_output(cls, config, checkpoint, layer, small)
    diff_loop, diff_yours = float(np.abs(loop - vec).max()), float(np.abs(loop - yours).max())
    ok &= diff_loop <= LOOP_TOL and diff_yours <= 1e-4
    lines.append(f"3. explicit loops over sequences, heads, queries and keys vs reshape/transpose: "
                 f"max|diff| {diff_loop:.1e}; vs your module: {diff_yours:.1e}")
    data = {"parameters_by_head_count": {str(h): n for h, n in counts.items()}, "formula": formula,
            "single_head_max_diff": diff1, "loops_vs_reshape_max_diff": diff_loop,
            "loops_vs_module_max_diff": diff_yours, "all_hold": bool(ok)}
    return ok, lines, data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m explore.equivalence", description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", type=Path, default=None, help="a step 07 file (default: steps/step_07.py)")
    parser.add_argument("--solutions", action="store_true", help="the course's step 07, not yours")
    parser.add_argument("--timeout", type=float, default=300, help="seconds allowed per call into your code")
    args = parser.parse_args(argv)
    runtime.setup()
    eager_kernels.load()  # the course's eager kernels, compiled by the checks' warm-up
    path = args.file.resolve() if args.file else step_file("07", solution=args.solutions)
    if (checkpoint := checkpoint_and_layer(parser, 0)) is None:
        return 2
    try:
        cls = import_step(path, "_explore_checked").GPT2MultiHeadAttention
        ok, lines, data = call(explore, cls, checkpoint, activations(checkpoint), checkpoint.layer,
                               timeout=args.timeout)
    except (LearnerError, AttributeError) as e:
        print(f"--explore could not run your module ({shown(path)}): {e}")
        return 1
    print(f"What multi-head attention is, shown on your module (GPT-2 h[{checkpoint.layer}] weights):")
    print("\n".join(lines))
    out = REPO / "out" / "explore-07.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({**data, **settings(checkpoint, file=str(path), layer=checkpoint.layer)}, indent=1))
    print(f"Wrote {out.relative_to(REPO)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
