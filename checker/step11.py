"""Step 11: the learner's GPT2LMHeadModel and load_hf_weights against Hugging Face's logits.

Parts: the earlier steps it uses; construction; loading this checkpoint's
tensors as they are stored; loading them in the layout of the original GPT-2
file (no `transformer.` prefix, the causal-mask buffers `attn.bias` and
`attn.masked_bias`, a stored `lm_head.weight`); the logits; and the logits
again with the model compiled into one graph, as `pixi run gpt2` runs it.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import numpy as np

from checker.attention_np import log_softmax, softmax
from checker.block_np import Model
from checker.compare import WHOLE_MODEL, Mistake, compare
from checker.compiled import BATCH, SEQ, compile_module, diagnose, run_compiled
from checker.deps import earlier_steps_part, used_modules
from checker.learner import LearnerError
from checker.loading import hf_state, require_module
from checker.reference import activations, token_ids
from checker.report import FAIL, PASS, Part, Report
from checker.runner import StepRun, int_tensor
from checker.step10 import body_names
from checker.weights import MODEL_FILE, Checkpoint

CLASS = "GPT2LMHeadModel"
AXES = ("sequences", "positions", "")


def stored_tensors(checkpoint: Checkpoint) -> dict[str, np.ndarray]:
    """Every tensor of model.safetensors, named and laid out as stored."""
    from safetensors.numpy import load_file

    return load_file(checkpoint.path / MODEL_FILE)


def original_layout(tensors: dict[str, np.ndarray], n_positions: int, *, prefix: bool = False,
                    buffers: bool = True, lm_head: bool = True) -> dict[str, np.ndarray]:
    """The same weights as openai-community/gpt2's own file names and pads them.

    The switches undo one difference at a time, to find the one a loader trips on.
    """
    out = {name.removeprefix("transformer."): value for name, value in tensors.items()}
    mask = np.tril(np.ones((n_positions, n_positions), dtype=np.float32))[None, None]
    for layer in sorted({n.split(".")[1] for n in out if n.startswith("h.")}, key=int) if buffers else []:
        out[f"h.{layer}.attn.bias"] = mask
        out[f"h.{layer}.attn.masked_bias"] = np.array(-1e4, dtype=np.float32)
    if prefix:
        out = {f"transformer.{name}": value for name, value in out.items()}
    if lm_head:
        out["lm_head.weight"] = out.get("wte.weight", out.get("transformer.wte.weight"))
    return out


CONV1D_NOT_TRANSPOSED = Mistake(
    "load-conv1d-not-transposed", "a Conv1D weight was loaded as stored, [in, out]",
    "Conv1D weights (c_attn, c_proj, c_fc) must be transposed for Linear: value.T")
# The original layout's differences, each with the switch that undoes it.
LAYOUT_MISTAKES = {
    "buffers": Mistake("load-buffers-kept", "the causal-mask buffers attn.bias / attn.masked_bias were loaded "
                       "as if they were parameters", "skip names ending in .attn.bias or .attn.masked_bias: "
                       "they are the mask, not weights (careful: c_attn.bias is a weight)"),
    "lm_head": Mistake("load-lm-head-kept", "the stored lm_head.weight was loaded, but the model has no lm_head",
                       "the head is tied to wte: skip lm_head.weight"),
    "prefix": Mistake("load-prefix-assumed", "the loader expects every name to start with `transformer.`; "
                      "the original file has no prefix", "add `transformer.` to names that lack it"),
}


def _loading_part(name: str, run: StepRun, build, load, tensors, expected) -> tuple[Part, object | None]:
    """Builds a fresh model, loads `tensors` with the learner's function, compares every parameter."""
    from max.experimental import functional as F

    try:
        with F.lazy():
            model = require_module(run.call(build))
        run.call(load, model, tensors)
        got = dict(model.parameters)
    except LearnerError as e:
        return Part.from_error(name, e), None
    missing = [n for n in expected if n not in got]
    if missing:
        return Part(name, FAIL, f"the model has no parameter {missing[0]} ({len(missing)} missing)"), None
    for n, want in expected.items():
        value = np.from_dlpack(got[n])
        if value.shape == want.shape and np.array_equal(value, want):
            continue
        if value.shape == want.shape[::-1] or (value.shape == want.shape and np.array_equal(value, want.T)):
            return Part(name, FAIL, f"{n} holds Hugging Face's [in, out] layout", mistake=CONV1D_NOT_TRANSPOSED), None
        return Part(name, FAIL, f"{n} does not hold GPT-2's {n}"), None
    return Part(name, PASS, f"all {len(expected)} parameters hold GPT-2's values", margin=0.0), model


def _logits(model, ids, **switches):
    return model().hidden(ids, **switches) @ model().wte.T.astype(np.float64)


# Each computes the logits [B, T, V] with the mistake from `model` (a function that
# returns the numpy GPT-2, built only when needed) and the ids.
LOGITS_MISTAKES = [
    Mistake("logits-softmax", "forward returned probabilities (softmax), not logits",
            "return the raw scores; sampling applies softmax later", lambda model, ids: softmax(_logits(model, ids))),
    Mistake("logits-log-softmax", "forward returned log-probabilities, not logits",
            "return the raw scores", lambda model, ids: log_softmax(_logits(model, ids))),
    Mistake("logits-before-ln-f", "the head read the hidden states before ln_f",
            "GPT2Model's output already has ln_f applied: use it", lambda model, ids: _logits(model, ids, ln_f=False)),
]
CATALOGUE = [CONV1D_NOT_TRANSPOSED, *LAYOUT_MISTAKES.values(), *LOGITS_MISTAKES]


def _pretransposed(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The checkpoint with its Conv1D weights already in Linear's [out, in] layout."""
    conv1d = ("c_attn", "c_proj", "c_fc")
    return {n: v.T.copy() if n.endswith(".weight") and n.split(".")[-2] in conv1d else v for n, v in tensors.items()}


def _first_that_loads(run: StepRun, build, load, candidates, expected) -> Mistake | None:
    """The mistake whose undoing makes the learner's loader work: of (mistake, tensors with
    that one difference undone), the first whose tensors load right."""
    for mistake, tensors in candidates:
        if _loading_part("", run, build, load, tensors, expected)[0].status == PASS:
            return mistake
    return None


def check(path: Path, checkpoint: Checkpoint, *, timeout: float = 300.0) -> Report:
    refs = activations(checkpoint)
    _, inputs = token_ids(checkpoint)
    config = checkpoint.learner_config()
    run = StepRun("11", CLASS, path, checkpoint, f"{inputs}; float32, logits {WHOLE_MODEL}",
                  ["earlier steps", "loading this checkpoint", "loading the original GPT-2 layout", "logits",
                   "compiled"], timeout=timeout)
    step = run.import_step()
    cls = step and run.need(step, CLASS)
    load = step and run.need(step, "load_hf_weights")
    if cls is None or load is None:
        return run.finish(f"needs {CLASS} and load_hf_weights")
    run.add(earlier_steps_part(step, checkpoint, timeout=timeout))
    names = body_names(checkpoint)
    expected = {f"transformer.{n}": v for n, v in hf_state(checkpoint, "transformer.", names).items()}
    tensors = stored_tensors(checkpoint)
    part, model = _loading_part("loading this checkpoint", run, lambda: cls(config), load, tensors, expected)
    if part.status == FAIL and part.mistake is None:
        part.mistake = _first_that_loads(run, lambda: cls(config), load,
                                         [(CONV1D_NOT_TRANSPOSED, _pretransposed(tensors))], expected)
    run.add(part)
    part, _ = _loading_part("loading the original GPT-2 layout", run, lambda: cls(config), load,
                            original_layout(tensors, config.n_positions), expected)
    if part.status == FAIL and model is not None:
        undone = {"buffers": {"buffers": False}, "lm_head": {"lm_head": False}, "prefix": {"prefix": True}}
        part.mistake = _first_that_loads(
            run, lambda: cls(config), load,
            [(LAYOUT_MISTAKES[k], original_layout(tensors, config.n_positions, **switch)) for k, switch in undone.items()],
            expected)
    run.add(part)
    ids = refs["ids"]
    if model is None:
        run.todo_only(["logits"], lambda: cls(config).forward(int_tensor(ids)))
        return run.finish("needs the checkpoint to load")
    logits = run.run_part("logits", lambda: model.forward(int_tensor(ids)), (), refs["logits"], AXES,
                          LOGITS_MISTAKES, (functools.cache(lambda: Model(checkpoint)), ids), tol=WHOLE_MODEL,
                          what="forward")
    run.point_to_earlier_steps(logits)
    if all(p.status == PASS for p in run.report.parts):
        run.add(_compiled_part(run, step, model, checkpoint, refs))
    return run.finish("runs once the parts above pass")


def _compiled_part(run: StepRun, step, model, checkpoint: Checkpoint, refs: dict) -> Part:
    """The loaded model compiled as `pixi run gpt2` compiles it, at two batch sizes and lengths.

    When the graph's logits are wrong (op by op they are right: the logits
    part passed), the pieces of the learner's steps are compiled one at a
    time to name the step whose code changes when compiled.
    """
    cases = [(refs["ids"], refs["logits"]), (refs["ids"][:1, :6], refs["logits"][:1, :6])]
    shown = " and ".join(f"{ids.shape[0]} x {ids.shape[1]} tokens" for ids, _ in cases)
    print("(compiling your model into one graph, as pixi run gpt2 does: 1-3 min after a change to its code, "
          "~2 s when unchanged)", file=sys.stderr, flush=True)
    try:
        compiled = run.call(compile_module, model, [(cases[0][0], (BATCH, SEQ))])
        verdicts = [compare(run.call(run_compiled, compiled, [ids])[0], want.astype(np.float64), axes=AXES,
                            mistakes=[], tol=WHOLE_MODEL) for ids, want in cases]
    except LearnerError as e:
        return Part("compiled", FAIL, f"your model cannot be compiled with a symbolic batch and length, as pixi run "
                    f"gpt2 compiles it: {e}", diagnose(used_modules(step), checkpoint, refs, run, e))
    worst = max(verdicts, key=lambda v: (not v.ok, v.margin or 0.0))
    summary = f"{shown}, symbolic batch and length as pixi run gpt2 compiles it: {worst.summary}"
    if worst.ok:
        return Part("compiled", PASS, summary, margin=worst.margin)
    return Part("compiled", FAIL, summary, [
        *worst.details, "run op by op your model is right (the logits part passes): what changes is how MAX "
        "compiles it", *diagnose(used_modules(step), checkpoint, refs, run)], margin=worst.margin)
