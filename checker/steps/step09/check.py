"""Step 09: the learner's GPT2Block against Hugging Face's `transformer.h[0]`.

Parts: the learner's earlier steps that the block uses (their own checks),
construction (every `h.0.*` weight loads by name), and forward on the block's
real input.
"""

from __future__ import annotations

from pathlib import Path

from checker.diagnosis.compiled import Probe
from checker.diagnosis.localise import block
from checker.harness.deps import earlier_steps_part
from checker.harness.runner import StepRun
from checker.references.block_np import NAMES, Block
from checker.references.reference import activations, token_ids
from checker.reporting.compare import ONE_LAYER
from checker.reporting.report import Report
from checker.running.tensors import tensor
from checker.steps.step09.mistakes import CATALOGUE
from runtime.checkpoints import Checkpoint
from runtime.compiling import TOKENS
from runtime.loading import hf_state, load_module

CLASS = "GPT2Block"
AXES = ("sequences", "positions", "")


def check(path: Path, checkpoint: Checkpoint, *, timeout: float = 300.0) -> Report:
    refs = activations(checkpoint)
    _, inputs = token_ids(checkpoint)
    config = checkpoint.learner_config()
    run = StepRun("09", CLASS, path, checkpoint,
                  f"h[{checkpoint.layer}]'s input for {inputs}; float32, {ONE_LAYER}",
                  ["earlier steps", "construction", "forward"], timeout=timeout)
    step = run.import_step()
    cls = step and run.need(step, CLASS)
    if cls is None:
        return run.finish(f"needs {CLASS}")
    run.add(earlier_steps_part(step, checkpoint, timeout=timeout))
    state = hf_state(checkpoint, f"transformer.h.{checkpoint.layer}.", NAMES)
    module = run.construct(lambda: cls(config), state,
                           f"ln_1, attn, ln_2, mlp; GPT-2's transformer.h.{checkpoint.layer} loaded",
                           try_forward=lambda m: m(tensor(refs["block_in"])))
    if module is None:
        return run.finish("needs construction to pass (the weights must load)")
    numpy_block = Block(checkpoint, checkpoint.layer)
    fwd = run.run_part("forward", module, (refs["block_in"],), refs["block_out"], AXES,
                       CATALOGUE, (numpy_block,),
                       localise=lambda got: block(run, module, refs["block_in"].astype("float64"), numpy_block))
    run.point_to_earlier_steps(fwd)
    return run.finish()


def _probe_module(step, checkpoint, run):
    return load_module(run, lambda: step.GPT2Block(checkpoint.learner_config()),
                       hf_state(checkpoint, f"transformer.h.{checkpoint.layer}.", NAMES))


PROBE = Probe("09", "GPT2Block", _probe_module, lambda r: [(r["block_in"], TOKENS)], lambda r: r["block_out"],
              ("sequences", "positions", ""))
