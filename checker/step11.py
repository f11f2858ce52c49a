"""Step 11: the learner's GPT2LMHeadModel and load_hf_weights against Hugging Face's logits.

Parts: the earlier steps it uses; construction; loading this checkpoint's
tensors as they are stored; loading them in the layout of the original GPT-2
file (no `transformer.` prefix, the causal-mask buffers `attn.bias` and
`attn.masked_bias`, a stored `lm_head.weight`); and the logits.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from checker.block_np import Model
from checker.compare import Mistake
from checker.deps import earlier_steps_part
from checker.learner import LearnerError
from checker.loading import hf_state
from checker.reference import activations, token_ids
from checker.report import FAIL, PASS, Part, Report
from checker.runner import StepRun, int_tensor
from checker.step10 import body_names
from checker.weights import MODEL_FILE, Checkpoint

CLASS = "GPT2LMHeadModel"
AXES = ("sequences", "positions", "")
LOGITS_TOL = 1e-3  # logits reach ~10; float32 sums over 768 products


def stored_tensors(checkpoint: Checkpoint) -> dict[str, np.ndarray]:
    """Every tensor of model.safetensors, named and laid out as stored."""
    from safetensors.numpy import load_file

    return load_file(checkpoint.path / MODEL_FILE)


def original_layout(tensors: dict[str, np.ndarray], n_positions: int) -> dict[str, np.ndarray]:
    """The same weights as openai-community/gpt2's own file names and pads them."""
    out = {name.removeprefix("transformer."): value for name, value in tensors.items()}
    mask = np.tril(np.ones((n_positions, n_positions), dtype=np.float32))[None, None]
    for layer in sorted({n.split(".")[1] for n in out if n.startswith("h.")}, key=int):
        out[f"h.{layer}.attn.bias"] = mask
        out[f"h.{layer}.attn.masked_bias"] = np.array(-1e4, dtype=np.float32)
    out["lm_head.weight"] = out["wte.weight"]
    return out


def _loading_part(name: str, run: StepRun, build, load, tensors, expected) -> tuple[Part, object | None]:
    """Builds a fresh model, loads `tensors` with the learner's function, compares every parameter."""
    from max.experimental import functional as F

    try:
        with F.lazy():
            model = run.call(build)
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
            return Part(name, FAIL, f"{n} holds Hugging Face's [in, out] layout",
                        ["Conv1D weights (c_attn, c_proj, c_fc) must be transposed for Linear: value.T"]), None
        return Part(name, FAIL, f"{n} does not hold GPT-2's {n}"), None
    return Part(name, PASS, f"all {len(expected)} parameters hold GPT-2's values"), model


def logits_mistakes(checkpoint: Checkpoint, ids: np.ndarray) -> list[Mistake]:
    model = functools.cache(lambda: Model(checkpoint))

    def logits(**switches):
        return model().hidden(ids, **switches) @ model().wte.T.astype(np.float64)

    def softmax(z):
        e = np.exp(z - z.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    return [
        Mistake("logits-softmax", "forward returned probabilities (softmax), not logits",
                "return the raw scores; sampling applies softmax later", lambda: softmax(logits())),
        Mistake("logits-log-softmax", "forward returned log-probabilities, not logits",
                "return the raw scores", lambda: np.log(softmax(logits()))),
        Mistake("logits-before-ln-f", "the head read the hidden states before ln_f",
                "GPT2Model's output already has ln_f applied: use it", lambda: logits(ln_f=False)),
    ]


def check(path: Path, checkpoint: Checkpoint, *, timeout: float = 300.0) -> Report:
    refs = activations(checkpoint)
    _, inputs = token_ids(checkpoint)
    config = checkpoint.learner_config()
    run = StepRun("11", CLASS, path, checkpoint, f"{inputs}; float32, tolerance {LOGITS_TOL:.0e} on logits",
                  ["earlier steps", "loading this checkpoint", "loading the original GPT-2 layout", "logits"],
                  timeout=timeout)
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
    run.add(part)
    part, _ = _loading_part("loading the original GPT-2 layout", run, lambda: cls(config), load,
                            original_layout(tensors, config.n_positions), expected)
    run.add(part)
    ids = refs["ids"]
    if model is None:
        run.todo_only(["logits"], lambda: cls(config).forward(int_tensor(ids)))
        return run.finish("needs the checkpoint to load")
    logits = run.run_part("logits", lambda: model.forward(int_tensor(ids)), (), refs["logits"], AXES,
                          logits_mistakes(checkpoint, ids), tol=LOGITS_TOL, what="forward")
    run.point_to_earlier_steps(logits)
    return run.finish()
