"""Step 09: the learner's GPT2Block against Hugging Face's `transformer.h[0]`.

Parts: the learner's earlier steps that the block uses (their own checks),
construction (every `h.0.*` weight loads by name), and forward on the block's
real input.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from checker.references.block_np import NAMES, WIRING_MISTAKES, Block, half
from checker.reporting.compare import ONE_LAYER, Mistake
from checker.harness.deps import earlier_steps_part
from checker.running.loading import hf_state, load_module
from checker.diagnosis.localise import block
from checker.references.reference import activations, token_ids
from checker.reporting.report import Report
from checker.harness.runner import StepRun
from checker.running.tensors import tensor
from checker.references.weights import Checkpoint
from checker.registry import Step, register
from checker.diagnosis.compiled import TOKENS, Probe

CLASS = "GPT2Block"
AXES = ("sequences", "positions", "")


def _both(x, b: Block, wiring: str):
    return half(half(x, b.ln_1, b.attn, wiring=wiring), b.ln_2, b.mlp, wiring=wiring)


# Wiring mistakes of a whole block, each computed from its input x and the numpy Block b.
CATALOGUE = [
    *(Mistake(f"residual-{w}", says, hint, partial(_both, wiring=w)) for w, (says, hint) in WIRING_MISTAKES.items()),
    Mistake("block-ln-swapped", "ln_2 was used before the attention and ln_1 before the MLP",
            "ln_1 goes with attn, ln_2 with mlp", lambda x, b: half(half(x, b.ln_2, b.attn), b.ln_1, b.mlp)),
    Mistake("block-ln-1-twice", "ln_1 was used before both the attention and the MLP",
            "each half has its own LayerNorm: ln_2 goes before the MLP",
            lambda x, b: half(half(x, b.ln_1, b.attn), b.ln_1, b.mlp)),
    Mistake("block-mlp-first", "the MLP ran before the attention", "attention first, then the MLP",
            lambda x, b: half(half(x, b.ln_2, b.mlp), b.ln_1, b.attn)),
    Mistake("block-no-mlp", "the MLP half is missing", "the block ends with x + mlp(ln_2(x))",
            lambda x, b: half(x, b.ln_1, b.attn)),
    Mistake("block-parallel", "attention and MLP both read the block's input (in parallel)",
            "the MLP reads the stream after the attention was added",
            lambda x, b: x + b.attn(b.ln_1(x)) + b.mlp(b.ln_2(x))),
]


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
    module = run.construct(lambda: cls(config), state, f"ln_1, attn, ln_2, mlp; GPT-2's transformer.h.{checkpoint.layer} loaded",
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


register(Step("09", check, CATALOGUE, reads=("GPT2Block",), probe=PROBE))
