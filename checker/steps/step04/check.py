"""Step 04: the learner's GPT2MLP against Hugging Face's `h[0].mlp`, on its real input (ln_2's output)."""

from __future__ import annotations

import inspect
from pathlib import Path

from checker.diagnosis import localise
from checker.diagnosis.compiled import Probe, layer_module
from checker.harness.runner import StepRun
from checker.references.reference import activations, token_ids
from checker.reporting.compare import ONE_LAYER
from checker.reporting.report import Report
from checker.running.tensors import tensor
from checker.steps.step04.mistakes import MISTAKES
from runtime.checkpoints import Checkpoint
from runtime.compiling import TOKENS
from runtime.loading import hf_state

CLASS = "GPT2MLP"
AXES = ("sequences", "positions", "")
NAMES = ["c_fc.weight", "c_fc.bias", "c_proj.weight", "c_proj.bias"]

def _book_signature(cls) -> bool:
    """The online book's contract (Jan and Feb 2026) is GPT2MLP(intermediate_size, config): two arguments."""
    try:
        params = list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):
        return False
    required = [p for p in params if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(required) == 2


def build(cls, config):
    """The learner's GPT2MLP, built as its contract asks (the book's: the inner size first)."""
    return cls(config.n_inner, config) if _book_signature(cls) else cls(config)


def check(path: Path, checkpoint: Checkpoint, *, timeout: float = 300.0) -> Report:
    refs = activations(checkpoint)
    _, inputs = token_ids(checkpoint)
    config = checkpoint.learner_config()
    C, I = config.n_embd, config.n_inner
    state = hf_state(checkpoint, f"transformer.h.{checkpoint.layer}.mlp.", NAMES)
    run = StepRun("04", CLASS, path, checkpoint,
                  f"h[{checkpoint.layer}].ln_2 output for {inputs}; float32, {ONE_LAYER}",
                  ["construction", "forward"], timeout=timeout)
    step = run.import_step()
    cls = step and run.need(step, CLASS)
    if cls is None:
        return run.finish(f"needs {CLASS}")
    if _book_signature(cls):
        run.contract("GPT2MLP(intermediate_size, config)")
    module = run.construct(
        lambda: build(cls, config), state,
        f"c_fc Linear({C} -> {I}), c_proj Linear({I} -> {C}), both with bias; GPT-2 h[{checkpoint.layer}].mlp loaded",
        try_forward=lambda m: m(tensor(refs["ln_2"])))
    if module is None:
        return run.finish("needs construction to pass (the weights must load)")
    # Mistakes are computed from Hugging Face's Conv1D layout, [in, out].
    p = {n.replace(".", "_"): (v.T if n.endswith("weight") else v).astype("float64") for n, v in state.items()}
    run.run_part("forward", module, (refs["ln_2"],), refs["mlp"], AXES, MISTAKES, (p,),
                 localise=lambda got: localise.mlp(run, module, refs["ln_2"].astype("float64"), p))
    return run.finish()


def _probe_module(step, checkpoint, run):
    return layer_module(run, lambda: build(step.GPT2MLP, checkpoint.learner_config()), checkpoint, "mlp.",
                        ["c_fc.weight", "c_fc.bias", "c_proj.weight", "c_proj.bias"])


PROBE = Probe("04", "GPT2MLP", _probe_module, lambda r: [(r["ln_2"], TOKENS)], lambda r: r["mlp"],
              ("sequences", "positions", ""))
