"""Step 03: the learner's LayerNorm against Hugging Face's `h[0].ln_1`.

Parts: construction (weight and bias of shape [C] that GPT-2's ln_1 loads
into), forward on the block's real input, forward on the same input scaled
by 1e-3, where the variance is small enough for epsilon to matter, and
forward on the same rows each shifted by a constant (-1 .. 1 times its
standard deviation), where a centring that is nearly right is not.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np

from checker.diagnosis import localise
from checker.diagnosis.compiled import Probe, layer_module
from checker.harness.runner import StepRun
from checker.references.reference import TINY, activations, shifted, token_ids
from checker.reporting.compare import ONE_LAYER
from checker.reporting.report import Report
from checker.running.tensors import tensor
from checker.steps.step03.mistakes import MISTAKES
from runtime.checkpoints import Checkpoint
from runtime.compiling import TOKENS
from runtime.loading import hf_state

CLASS = "LayerNorm"
AXES = ("sequences", "positions", "")

def _book_signature(cls) -> bool:
    """The online book's contract (Jan and Feb 2026) is LayerNorm(dim, *, eps): eps only by name."""
    try:
        eps = inspect.signature(cls).parameters.get("eps")
    except (TypeError, ValueError):
        return False
    return eps is not None and eps.kind is eps.KEYWORD_ONLY


def build(cls, dim: int, eps: float):
    """The learner's LayerNorm, built as its contract asks (the book's: eps by name)."""
    return cls(dim, eps=eps) if _book_signature(cls) else cls(dim, eps)


def check(path: Path, checkpoint: Checkpoint, *, timeout: float = 300.0) -> Report:
    refs = activations(checkpoint)
    _, inputs = token_ids(checkpoint)
    config = checkpoint.config()
    C, eps = config["n_embd"], config["layer_norm_epsilon"]
    state = hf_state(checkpoint, f"transformer.h.{checkpoint.layer}.ln_1.", ["weight", "bias"])
    run = StepRun("03", CLASS, path, checkpoint,
                  f"h[{checkpoint.layer}]'s input{' (wte + wpe)' if checkpoint.layer == 0 else ''} for {inputs}; "
                  f"float32, {ONE_LAYER}",
                  ["construction", "forward", "forward, tiny inputs", "forward, shifted rows"], timeout=timeout)
    step = run.import_step()
    cls = step and run.need(step, CLASS)
    if cls is None:
        return run.finish(f"needs {CLASS}")
    if _book_signature(cls):
        run.contract("LayerNorm(dim, *, eps), eps given by name")
    module = run.construct(lambda: build(cls, C, eps), state,
                           f"weight [{C}], bias [{C}], eps {eps}; GPT-2 h[{checkpoint.layer}].ln_1 loaded",
                           try_forward=lambda m: m(tensor(refs["block_in"])))
    if module is None:
        return run.finish("needs construction to pass (the weights must load)")
    args = (state["weight"].astype(np.float64), state["bias"].astype(np.float64), eps)
    for name, x, want in (("forward", refs["block_in"], refs["ln_1"]),
                          ("forward, tiny inputs", refs["block_in"] * TINY, refs["ln_1_tiny"]),
                          ("forward, shifted rows", shifted(refs["block_in"]), refs["ln_1_shifted"])):
        run.run_part(name, module, (x,), want, AXES, MISTAKES, args,
                     localise=lambda got, x=x: localise.layer_norm(run, module, x.astype(np.float64), *args))
    return run.finish()


def _probe_module(step, checkpoint, run):
    config = checkpoint.learner_config()
    return layer_module(run, lambda: build(step.LayerNorm, config.n_embd, config.layer_norm_epsilon), checkpoint,
                        "ln_1.", ["weight", "bias"])


PROBE = Probe("03", "LayerNorm", _probe_module, lambda r: [(r["block_in"], TOKENS)], lambda r: r["ln_1"],
              ("sequences", "positions", ""))
