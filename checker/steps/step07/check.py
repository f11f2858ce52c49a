"""Step 07: the learner's GPT2MultiHeadAttention against Hugging Face's GPT2Attention.

Six parts, each checked on its own so one mistake does not hide the others:

  construction   c_attn and c_proj exist with GPT-2's shapes; the weights load
  _split_heads   [B, T, C] -> [B, H, T, D], on the reference query
  _merge_heads   [B, H, T, D] -> [B, T, C], on the reference attention output
  _attn          the reference q, k, v -> per-head attention output
  forward        the layer's real input (ln_1's output) -> the layer's output
  compiled       forward again, compiled with a symbolic batch and length as
                 `pixi run gpt2` compiles it (once every part above passes)

Each part's mistakes are listed with the output they would produce; see
`checker.reporting.compare` for how one is named.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from pathlib import Path

import numpy as np
from max.experimental import functional as F

from checker.diagnosis import localise_attention as probes
from checker.diagnosis.compiled import Probe, layer_module
from checker.harness.runner import StepRun
from checker.references import attention_np as ref
from checker.references.reference import activations, token_ids
from checker.reporting.compare import ONE_LAYER, Mistake
from checker.reporting.report import PASS, Part, Report
from checker.running.tensors import tensor
from checker.steps.step07.mistakes import ATTN_MISTAKES, FORWARD_MISTAKES, MERGE_MISTAKES, SPLIT_MISTAKES
from runtime.checkpoints import Checkpoint
from runtime.compiling import TOKENS
from runtime.learner import LearnerError
from runtime.loading import hf_state, load_module

CLASS = "GPT2MultiHeadAttention"
HEAD_AXES = ("sequences", "heads", "positions", "")  # [B, H, T, D]
TOKEN_AXES = ("sequences", "positions", "")  # [B, T, C]


def _forward_with(part: str, m: Mistake) -> Mistake:
    """A part's mistake ("split", "merge" or "attn"), seen through the whole forward pass."""
    return dataclasses.replace(m, compute=partial(ref.forward, **{part: m.compute}))


def _right_alone(mistake: Mistake) -> str | None:
    """The method ("_split_heads" or "_merge_heads") whose own mistake forward's output is: one that passed alone."""
    return next((f"_{part}_heads" for part, ms in (("split", SPLIT_MISTAKES), ("merge", MERGE_MISTAKES))
                 if mistake.id in {m.id for m in ms}), None)


def _construct(cls, config, checkpoint, run: StepRun) -> tuple[object, Part]:
    """Builds the learner's module and loads GPT-2's weights into it."""
    C = config.n_embd
    state = hf_state(checkpoint, f"transformer.h.{checkpoint.layer}.attn.",
                     ["c_attn.weight", "c_attn.bias", "c_proj.weight", "c_proj.bias"])
    module = load_module(run, lambda: cls(config), state)
    count = sum(int(np.prod([int(d) for d in t.shape])) for n, t in module.parameters
                if n.startswith(("c_attn.", "c_proj.")))
    return module, Part(
        "construction", PASS,
        f"c_attn Linear({C} -> {3 * C}), c_proj Linear({C} -> {C}), both with bias: {count:,} parameters "
        f"= 4*{C}^2 + 4*{C}; GPT-2 h[{checkpoint.layer}] weights loaded",
    )


def check(path: Path, checkpoint: Checkpoint, *, timeout: float = 300.0) -> Report:
    """Runs the step 07 check on the step file at `path`."""
    refs = activations(checkpoint)
    _, inputs = token_ids(checkpoint)
    config = checkpoint.learner_config()
    H, C = config.n_head, config.n_embd
    D = C // H
    run = StepRun("07", CLASS, path, checkpoint,
                  f"h[{checkpoint.layer}].ln_1 output for {inputs}; float32, {ONE_LAYER}",
                  ["construction", "_split_heads", "_merge_heads", "_attn", "forward", "compiled"], timeout=timeout)
    step = run.import_step()
    cls = step and run.need(step, CLASS)
    if cls is None:
        return run.finish(f"needs {CLASS}")

    try:
        module, part = _construct(cls, config, checkpoint, run)
        run.add(part)
    except LearnerError as e:
        run.add(Part.from_error("construction", e))
        # The shape-only parts can still run on an instance without its layers.
        try:
            with F.lazy():
                module = run.call(cls, config)
        except LearnerError:
            return run.finish(f"needs {CLASS}(config) to construct")

    def method(name):
        return getattr(module, name, None)

    query = refs["qkv"][..., :C]
    params = {k: refs[k].astype(np.float64) for k in ("c_attn_weight", "c_attn_bias", "c_proj_weight", "c_proj_bias")}
    B, T = query.shape[:2]
    run.run_part("_split_heads", method("_split_heads"), (query, H, D), refs["q"], HEAD_AXES, SPLIT_MISTAKES, (H,),
                 localise=lambda got: probes.layout(run, method("_split_heads"), (B, T, C), (H, D),
                                                    [((B, T, H, D), "BTHD"), ((B, T, D, H), "BTDH")],
                                                    (B, H, T, D), (0, 2, 1, 3)))
    run.run_part("_merge_heads", method("_merge_heads"), (refs["heads"], H, D), refs["merged"], TOKEN_AXES,
                 MERGE_MISTAKES, localise=lambda got: probes.layout(run, method("_merge_heads"), (B, H, T, D),
                                                                    (H, D), [((B, H, T, D), "BHTD")], (B, T, C),
                                                                    (0, 2, 1, 3)))
    run.run_part("_attn", method("_attn"), (refs["q"], refs["k"], refs["v"]), refs["heads"], HEAD_AXES, ATTN_MISTAKES,
                 localise=lambda got: probes.attention(run, method("_attn"), refs["q"].astype(np.float64),
                                                       refs["k"].astype(np.float64)))

    if run.report.parts[0].status != PASS:
        run.todo_only(["forward"], module, tensor(refs["ln_1"]))
        return run.finish("needs construction to pass (the weights must load)")
    broken = [p.name for p in run.report.parts[1:] if p.status != PASS]
    composed = [
        *([] if broken else FORWARD_MISTAKES),  # a failing part it uses is named, not forward's own code
        *(_forward_with("split", m) for m in SPLIT_MISTAKES),
        *(_forward_with("merge", m) for m in MERGE_MISTAKES),
        *(_forward_with("attn", m) for m in ATTN_MISTAKES),
    ]
    # With a part it uses failing, forward is not probed: nothing may blame forward itself.
    fwd = run.run_part("forward", module, (refs["ln_1"],), refs["attn"], TOKEN_AXES, composed, (params, H),
                       localise=None if broken else lambda got: probes.attention_layers(run, module, refs, got, H))
    if fwd.status != PASS and broken:
        fwd.details.insert(0, f"forward uses {', '.join(broken)}: fix {'it' if len(broken) == 1 else 'them'} first")
    elif fwd.status != PASS and fwd.mistake and (alone := _right_alone(fwd.mistake)):
        fwd.details.append(f"forward computes what the likely mistake below would, yet your {alone} is right on "
                           f"its own, called as the check calls it ({alone}(tensor, num_heads, attn_head_size)): "
                           "look at how forward calls it (the arguments, their order)")
    run.compiled_part(step, checkpoint, refs)
    return run.finish("runs once the parts above pass")


def _probe_module(step, checkpoint, run):
    return layer_module(run, lambda: step.GPT2MultiHeadAttention(checkpoint.learner_config()), checkpoint, "attn.",
                        ["c_attn.weight", "c_attn.bias", "c_proj.weight", "c_proj.bias"])


def _probe_mistakes(refs):
    params = {k: refs[k].astype(np.float64) for k in ("c_attn_weight", "c_attn_bias", "c_proj_weight", "c_proj_bias")}
    H = refs["q"].shape[1]
    x = refs["ln_1"].astype(np.float64)
    return [(m, m.compute(x, params, H)) for m in (_forward_with("attn", a) for a in ATTN_MISTAKES)]


PROBE = Probe("07", "GPT2MultiHeadAttention", _probe_module, lambda r: [(r["ln_1"], TOKENS)], lambda r: r["attn"],
              ("sequences", "positions", ""), ONE_LAYER, _probe_mistakes)
