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

from functools import partial
from pathlib import Path

import numpy as np

from max.experimental import functional as F

from checker.references import attention_np as ref
from checker.diagnosis import localise
from checker.reporting.compare import ONE_LAYER, Mistake
from checker.running.learner import LearnerError
from checker.references.reference import activations, token_ids
from checker.reporting.report import PASS, Part, Report
from checker.running.loading import hf_state, load_module
from checker.harness.runner import StepRun
from checker.running.tensors import tensor
from checker.references.weights import Checkpoint
from checker.registry import Step, register
from checker.diagnosis.compiled import TOKENS, Probe, layer_module

CLASS = "GPT2MultiHeadAttention"
HEAD_AXES = ("sequences", "heads", "positions", "")  # [B, H, T, D]
TOKEN_AXES = ("sequences", "positions", "")  # [B, T, C]


def _reshape_head_dim_first(t, H):
    B, T, C = t.shape
    return t.reshape(B, T, C // H, H).transpose(0, 3, 1, 2)


SPLIT_MISTAKES = [
    Mistake(
        "split-no-transpose",
        "the heads were split off but not moved in front of the tokens: [B, T, H, D]",
        "after the reshape, swap the token and head axes so each head holds all its tokens",
        lambda t, H: t.reshape(*t.shape[:2], H, -1),
    ),
    Mistake(
        "split-heads-last",
        "the channels were reshaped as [head_dim, n_head] instead of [n_head, head_dim], "
        "so each head got every 12th channel",
        "the channels of one head are contiguous: reshape the last axis to (num_heads, attn_head_size)",
        _reshape_head_dim_first,
    ),
    Mistake(
        "split-heads-last-shape",
        "the channels were reshaped as [head_dim, n_head] and then transposed: [B, D, T, H]",
        "the channels of one head are contiguous: reshape the last axis to (num_heads, attn_head_size)",
        lambda t, H: t.reshape(*t.shape[:2], -1, H).transpose(0, 2, 1, 3),
    ),
    Mistake(
        "split-reshape-only",
        "the tensor was reshaped straight to [B, H, T, D], which cuts the sequence into pieces "
        "instead of cutting each token's channels",
        "reshape to [B, T, H, D] first, then transpose; a reshape alone never moves data between axes",
        lambda t, H: t.reshape(t.shape[0], H, t.shape[1], -1),
    ),
    Mistake(
        "split-batch-axis",
        "the batch axis was swapped with the heads ([H, T, B, D]), so attention would run across the "
        "sequences of the batch instead of across the tokens",
        "swap the token and head axes (1 and 2 of [B, T, H, D]); the batch axis stays first",
        lambda t, H: t.reshape(*t.shape[:2], H, -1).swapaxes(0, 2),
    ),
]

MERGE_MISTAKES = [
    Mistake(
        "merge-no-transpose",
        "[B, H, T, D] was reshaped to [B, T, C] without moving the heads back behind the tokens",
        "undo _split_heads in reverse order: transpose first, then reshape",
        lambda t: t.reshape(t.shape[0], t.shape[2], -1),
    ),
    Mistake(
        "merge-wrong-order",
        "the heads were flattened as [head_dim, n_head], interleaving the channels of different heads",
        "flatten [B, T, H, D] so that each head's channels stay together",
        lambda t: t.transpose(0, 2, 3, 1).reshape(t.shape[0], t.shape[2], -1),
    ),
    Mistake(
        "merge-no-reshape",
        "the heads were moved back behind the tokens but not flattened: [B, T, H, D]",
        "finish with a reshape to [B, T, num_heads * attn_head_size]",
        lambda t: t.transpose(0, 2, 1, 3),
    ),
]

ATTN_MISTAKES = [
    Mistake(
        "no-causal-mask",
        "there is no causal mask: every token also attends to the tokens after it",
        "add causal_mask(...) to the scores before softmax; the last position matches because "
        "it has no future to see",
        partial(ref.attend, mask="none"),
    ),
    Mistake(
        "scale-sqrt-n-embd",
        "the scores were divided by sqrt(n_embd) = sqrt(768) instead of sqrt(head_dim)",
        "each score is a dot product over one head's channels: scale by the head size",
        partial(ref.attend, scale="sqrt_c"),
    ),
    Mistake(
        "no-scale",
        "the scores were not scaled before softmax",
        "divide q.k by the square root of the head size, as in 'Attention is all you need'",
        partial(ref.attend, scale="none"),
    ),
    Mistake(
        "scale-head-dim",
        "the scores were divided by head_dim instead of its square root",
        "the scale is 1/sqrt(head_dim): use math.sqrt",
        partial(ref.attend, scale="d"),
    ),
    Mistake(
        "softmax-wrong-axis",
        "softmax ran over the query axis (-2), so columns sum to 1 instead of rows",
        "each query's weights over the keys must sum to 1: softmax over the last axis",
        partial(ref.attend, axis=-2),
    ),
    Mistake(
        "mask-after-softmax",
        "the mask was applied after softmax: future weights are zeroed but the rows no longer sum to 1",
        "mask the scores, then softmax: -inf scores become exactly 0 weight",
        partial(ref.attend, mask="after_softmax"),
    ),
    Mistake(
        "mask-added-after-softmax",
        "the -inf mask was added after softmax, so -inf reached the weighted sum and made NaN/inf",
        "add the mask to the scores before softmax, which turns -inf into a weight of exactly 0",
        partial(ref.attend, mask="-inf_after_softmax"),
    ),
    Mistake(
        "mask-zero-one",
        "the mask holds 0/1 instead of 0/-inf, so future tokens still get weight",
        "a masked score must be -inf (or very negative) for softmax to give it 0",
        partial(ref.attend, mask="0/1"),
    ),
    Mistake(
        "mask-multiplied",
        "the scores were multiplied by a 0/1 mask: a future score of 0 still gets weight after softmax",
        "add the mask (0 or -inf) to the scores instead of multiplying",
        partial(ref.attend, mask="multiply"),
    ),
]

def _inverse(order: str) -> str:
    """`key, value, query = split(...)` ("kvq") takes q from the third third: attention_np's order "vqk"."""
    return "".join("qkv"[order.index(name)] for name in "qkv")


_ORDERS = {"qvk": "query, value, key", "kqv": "key, query, value", "kvq": "key, value, query",
           "vqk": "value, query, key", "vkq": "value, key, query"}

FORWARD_MISTAKES = [
    *(
        Mistake(
            f"split-order-{order}",
            f"c_attn's output was used as ({_ORDERS[order]}); it holds (query, key, value) in that order",
            "split c_attn's output into three along the last axis and keep the order q, k, v",
            partial(ref.forward, order=_inverse(order)),
        )
        for order in _ORDERS
    ),
    Mistake(
        "no-c-proj",
        "forward returned the merged heads without the output projection c_proj",
        "the layer ends with self.c_proj(...)",
        partial(ref.forward, c_proj="missing"),
    ),
    Mistake(
        "c-proj-untransposed",
        "c_proj's weight was used as x @ W: Linear stores [out, in] (Hugging Face's Conv1D "
        "stores [in, out]), so the weight was effectively not transposed",
        "call the layer, self.c_proj(x), rather than multiplying by its weight",
        partial(ref.forward, c_proj="untransposed"),
    ),
    Mistake(
        "c-attn-no-bias",
        "c_attn's bias was not added",
        "call the layer, self.c_attn(x), which adds the bias for you",
        partial(ref.forward, attn_bias=False),
    ),
    Mistake(
        "c-proj-no-bias",
        "c_proj's bias was not added",
        "call the layer, self.c_proj(x), which adds the bias for you",
        partial(ref.forward, proj_bias=False),
    ),
]


CATALOGUE = [*SPLIT_MISTAKES, *MERGE_MISTAKES, *ATTN_MISTAKES, *FORWARD_MISTAKES]


def _forward_with(part: str, m: Mistake) -> Mistake:
    """A part's mistake ("split", "merge" or "attn"), seen through the whole forward pass."""
    return Mistake(m.id, m.says, m.hint, partial(ref.forward, **{part: m.compute}))


def _construct(cls, config, checkpoint, run: StepRun) -> tuple[object, Part]:
    """Builds the learner's module and loads GPT-2's weights into it."""
    C = config.n_embd
    state = hf_state(checkpoint, f"transformer.h.{checkpoint.layer}.attn.",
                     ["c_attn.weight", "c_attn.bias", "c_proj.weight", "c_proj.bias"])
    module = load_module(run, lambda: cls(config), state)
    count = sum(int(np.prod([int(d) for d in t.shape])) for n, t in module.parameters if n.startswith(("c_attn.", "c_proj.")))
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
    run.run_part("_split_heads", method("_split_heads"), (query, H, D), refs["q"], HEAD_AXES, SPLIT_MISTAKES, (H,))
    run.run_part("_merge_heads", method("_merge_heads"), (refs["heads"], H, D), refs["merged"], TOKEN_AXES, MERGE_MISTAKES)
    run.run_part("_attn", method("_attn"), (refs["q"], refs["k"], refs["v"]), refs["heads"], HEAD_AXES, ATTN_MISTAKES,
                 localise=lambda got: localise.attention(run, method("_attn"), refs["q"].astype(np.float64),
                                                         refs["k"].astype(np.float64)))

    if run.report.parts[0].status != PASS:
        run.todo_only(["forward"], module, tensor(refs["ln_1"]))
        return run.finish("needs construction to pass (the weights must load)")
    composed = [
        *FORWARD_MISTAKES,
        *(_forward_with("split", m) for m in SPLIT_MISTAKES),
        *(_forward_with("merge", m) for m in MERGE_MISTAKES),
        *(_forward_with("attn", m) for m in ATTN_MISTAKES),
    ]
    broken = [p.name for p in run.report.parts[1:] if p.status != PASS]
    # With a part it uses failing, forward is not probed: nothing may blame forward itself.
    fwd = run.run_part("forward", module, (refs["ln_1"],), refs["attn"], TOKEN_AXES, composed, (params, H),
                       localise=None if broken else lambda got: localise.attention_layers(run, module, refs))
    if fwd.status != PASS and broken:
        fwd.details.insert(0, f"forward uses {', '.join(broken)}: fix {'it' if len(broken) == 1 else 'them'} first")
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


register(Step("07", check, CATALOGUE, reads=("GPT2MultiHeadAttention",), probe=PROBE, compiles_in_check=True))
