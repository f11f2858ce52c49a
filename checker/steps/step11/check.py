"""Step 11: the learner's GPT2LMHeadModel and load_hf_weights against Hugging Face's logits.

Parts: the earlier steps it uses; construction; loading this checkpoint's
tensors as they are stored; loading them in the layout of the original GPT-2
file (no `transformer.` prefix, the causal-mask buffers `attn.bias` and
`attn.masked_bias`, a stored `lm_head.weight`), on a copy cut to 48 channels;
the logits; and the logits
again with the model compiled into one graph, as `pixi run gpt2` runs it.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from checker.diagnosis.compiled import diagnose
from checker.diagnosis.model import head
from checker.harness.deps import earlier_steps_part, used_modules
from checker.harness.runner import StepRun
from checker.references.block_np import model_of
from checker.references.reference import activations, token_ids
from checker.reporting.compare import WHOLE_MODEL, Mistake, compare
from checker.reporting.report import FAIL, PASS, Part, Report
from checker.running.tensors import int_tensor
from checker.steps.step10.check import body_names
from checker.steps.step11.mistakes import CONV1D_NOT_TRANSPOSED, CONV1D_PARTLY, LAYOUT_MISTAKES, LOGITS_MISTAKES
from runtime.checkpoints import Checkpoint
from runtime.compiling import BATCH, SEQ, compile_module, run_compiled
from runtime.learner import LearnerError
from runtime.loading import (
    BUFFERS,
    StateSpy,
    is_conv1d_weight,
    linear_layout,
    require_module,
    state_problems,
    stored_tensors,
)
from runtime.online_book import MODEL, book_load

# MAX is imported inside the functions that use it: importing it takes seconds.

CLASS = "GPT2LMHeadModel"
AXES = ("sequences", "positions", "")


def _parameters(tensors: dict[str, np.ndarray], names: list[str]) -> dict[str, np.ndarray]:
    """What the model's parameters must hold, `transformer.` + name -> float32 [out, in] (Conv1D
    weights transposed), taken from the file's tensors read once."""
    return {f"transformer.{n}": linear_layout(n, tensors.get(f"transformer.{n}", tensors.get(n))) for n in names}


# The layout part loads a GPT-2 with every name and block of this checkpoint but few channels: what it
# tests is how the loader treats names, buffers and the head, and a narrow copy tests that as well in
# a twentieth of the time.
NARROW = {"n_embd": 48, "vocab_size": 64, "n_positions": 32}


def narrow(tensors: dict[str, np.ndarray], config) -> tuple[dict[str, np.ndarray], object]:
    """The checkpoint's tensors cut to NARROW's sizes (each axis keeps its first entries), and their config.

    Each axis is cut by what it holds: channels C, 3C (c_attn's outputs), the MLP's inner size,
    the vocabulary and the positions.
    """
    small = SimpleNamespace(**vars(config))
    small.n_embd, small.vocab_size, small.n_positions = NARROW["n_embd"], NARROW["vocab_size"], NARROW["n_positions"]
    small.n_inner = config.n_inner * small.n_embd // config.n_embd
    sizes = {"wte": (small.vocab_size, small.n_embd), "wpe": (small.n_positions, small.n_embd),
             "c_attn": (small.n_embd, 3 * small.n_embd), "c_fc": (small.n_embd, small.n_inner),
             "mlp.c_proj": (small.n_inner, small.n_embd), "attn.c_proj": (small.n_embd, small.n_embd)}
    out = {}
    for name, value in tensors.items():
        if name.endswith(BUFFERS) or name.endswith("lm_head.weight"):
            continue  # original_layout adds them again, at the narrow sizes
        role = next((k for k in sizes if f"{k}." in f".{name}"), None)
        shape = sizes[role] if role else (small.n_embd,)  # the LayerNorms
        if name.endswith(".bias") and role:
            shape = shape[-1:]
        out[name] = np.ascontiguousarray(value[tuple(slice(0, n) for n in shape)])
    return out, small


def original_layout(tensors: dict[str, np.ndarray], n_positions: int) -> dict[str, np.ndarray]:
    """The same weights as openai-community/gpt2's own file names and pads them: no `transformer.`
    prefix, the causal mask stored as attn.bias / attn.masked_bias, and lm_head.weight."""
    out = {name.removeprefix("transformer."): value for name, value in tensors.items()}
    mask = np.tril(np.ones((n_positions, n_positions), dtype=np.float32))[None, None]
    for layer in sorted({n.split(".")[1] for n in out if n.startswith("h.")}, key=int):
        out[f"h.{layer}.attn.bias"] = mask
        out[f"h.{layer}.attn.masked_bias"] = np.array(-1e4, dtype=np.float32)
    out["lm_head.weight"] = out["wte.weight"]
    return out


BOOK = MODEL  # the online book's step 11: MaxGPT2LMHeadModel, loaded as its main.py loads it


def _named(problems, expected) -> Mistake | None:
    """The catalogued mistake the first problem is, if it is one."""
    kind, _, names = problems[0]
    if kind == "conv1d":
        conv1d = {n for n in expected if is_conv1d_weight(n)}
        return CONV1D_NOT_TRANSPOSED if conv1d <= set(names) else CONV1D_PARTLY
    return LAYOUT_MISTAKES.get(kind)


def _loading_part(name: str, run: StepRun, build, load, tensors, expected, n_layer: int,
                  which: str = "") -> tuple[Part, object | None]:
    """Builds a fresh model, loads `tensors` with the learner's function, compares every parameter.

    What the loader passed to load_state_dict is recorded: when MAX refuses it,
    or the parameters end up wrong, the part says which tensors were not
    transposed, missing, extra or misnamed.
    """
    from max.experimental import functional as F

    try:
        with F.lazy():
            model = require_module(run.call(build))
    except LearnerError as e:
        return Part.from_error(name, e), None
    spy = StateSpy(model)
    try:
        run.call(load, model, tensors)
    except LearnerError as e:
        problems = state_problems(spy.state, expected, n_layer) if spy.state is not None else []
        if not problems or e.todo:
            return Part.from_error(name, e), None
        return Part(name, FAIL, f"load_state_dict refused what your loader passed: {problems[0][1]}",
                    [line for _, line, _ in problems[1:]] + [f"(MAX said: {e})"], _named(problems, expected)), None
    problems = state_problems(dict(model.parameters), expected, n_layer)
    if problems:
        return Part(name, FAIL, f"after your loader, the model's parameters: {problems[0][1]}",
                    [line for _, line, _ in problems[1:]], _named(problems, expected)), None
    return Part(name, PASS, f"all {len(expected)} parameters {which + ' ' if which else ''}hold GPT-2's values",
                margin=0.0), model


def check(path: Path, checkpoint: Checkpoint, *, timeout: float = 300.0) -> Report:
    refs = activations(checkpoint)
    _, inputs = token_ids(checkpoint)
    config = checkpoint.learner_config()
    run = StepRun("11", CLASS, path, checkpoint, f"{inputs}; float32, logits {WHOLE_MODEL}",
                  ["earlier steps", "loading this checkpoint", "loading the original GPT-2 layout", "logits",
                   "compiled"], timeout=timeout)
    step = run.import_step()
    cls = step and run.need(step, CLASS, BOOK)
    load = book_load if run.book else step and run.need(step, "load_hf_weights")
    if cls is None or load is None:
        return run.finish(f"needs {CLASS} and load_hf_weights")
    run.add(earlier_steps_part(step, checkpoint, timeout=timeout))
    tensors = stored_tensors(checkpoint)
    names = body_names(checkpoint)
    expected = _parameters(tensors, names)
    if run.book:
        expected["lm_head.weight"] = expected["transformer.wte.weight"]
    part, model = _loading_part("loading this checkpoint", run, lambda: cls(config), load, tensors, expected,
                                config.n_layer)
    run.add(part)
    narrow_tensors, narrow_config = narrow(tensors, config)
    narrow_expected = _parameters(narrow_tensors, names)
    if run.book:
        narrow_expected["lm_head.weight"] = narrow_expected["transformer.wte.weight"]
    part, _ = _loading_part("loading the original GPT-2 layout", run, lambda: cls(narrow_config), load,
                            original_layout(narrow_tensors, narrow_config.n_positions), narrow_expected,
                            config.n_layer, f"of a GPT-2 cut to {narrow_config.n_embd} channels")
    run.add(part)
    ids = refs["ids"]
    if model is None:
        run.todo_only(["logits"], lambda: cls(config)(int_tensor(ids)))
        return run.finish("needs the checkpoint to load")
    logits = run.run_part("logits", lambda: model(int_tensor(ids)), (), refs["logits"], AXES,
                          LOGITS_MISTAKES, (functools.partial(model_of, checkpoint), ids), tol=WHOLE_MODEL,
                          what="forward", localise=lambda got: head(run, model, ids, refs))
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
