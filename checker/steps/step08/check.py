"""Step 08: the learner's residual_step, around the reference ln_1 + attention and ln_2 + MLP.

The LayerNorms and sub-layers passed in are the course's solutions loaded with
GPT-2's block weights, so this step is checked on its own, whatever the state
of steps 03, 04 and 07.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from checker.diagnosis.compiled import Probe, wrapping
from checker.diagnosis.localise import residual
from checker.harness.runner import StepRun
from checker.references.block_np import Block
from checker.references.reference import activations, token_ids
from checker.reporting.compare import ONE_LAYER
from checker.reporting.report import PASS, Part, Report
from checker.steps.step03 import check as step03
from checker.steps.step08.mistakes import CATALOGUE
from runtime.checkpoints import Checkpoint
from runtime.compiling import TOKENS
from runtime.loading import hf_state, load_module

# The solutions are imported inside the functions that use them: they import MAX, which takes seconds.

AXES = ("sequences", "positions", "")


# The online book's step 08 (Jan 2026) defines LayerNorm again (its step 09 imports it from here) and
# apply_residual_connection(input_tensor, sublayer_output), which returns their sum.
BOOK = ("apply_residual_connection", "LayerNorm(dim, *, eps) and apply_residual_connection(input_tensor, "
        "sublayer_output); its LayerNorm is checked as step 03 checks one")


def _layer_norm_part(path: Path, checkpoint: Checkpoint, timeout: float) -> Part:
    """Step 03's check of the file's LayerNorm, as one part: its first failing part, or its last."""
    parts = step03.check(path, checkpoint, timeout=timeout).parts
    part = next((p for p in parts if p.status != PASS), parts[-1])
    return replace(part, name="LayerNorm", summary=f"{part.name}: {part.summary}")


def reference_modules(checkpoint: Checkpoint, run: StepRun) -> dict[str, object]:
    """The solutions' ln_1, attn, ln_2 and mlp, loaded with the weights of block checkpoint.layer."""
    from solutions.solution_03 import LayerNorm
    from solutions.solution_04 import GPT2MLP
    from solutions.solution_07 import GPT2MultiHeadAttention

    config = checkpoint.learner_config()
    prefix = f"transformer.h.{checkpoint.layer}."
    build = {
        "ln_1": (lambda: LayerNorm(config.n_embd, config.layer_norm_epsilon), ["weight", "bias"]),
        "ln_2": (lambda: LayerNorm(config.n_embd, config.layer_norm_epsilon), ["weight", "bias"]),
        "attn": (lambda: GPT2MultiHeadAttention(config),
                 ["c_attn.weight", "c_attn.bias", "c_proj.weight", "c_proj.bias"]),
        "mlp": (lambda: GPT2MLP(config), ["c_fc.weight", "c_fc.bias", "c_proj.weight", "c_proj.bias"]),
    }
    return {name: load_module(run, make, hf_state(checkpoint, f"{prefix}{name}.", names))
            for name, (make, names) in build.items()}


def check(path: Path, checkpoint: Checkpoint, *, timeout: float = 300.0) -> Report:
    refs = activations(checkpoint)
    _, inputs = token_ids(checkpoint)
    run = StepRun("08", "residual_step", path, checkpoint,
                  f"h[{checkpoint.layer}]'s input for {inputs}, with the course's own LayerNorm, attention and MLP "
                  f"loaded with GPT-2 h[{checkpoint.layer}]; float32, {ONE_LAYER}",
                  ["attention half", "MLP half"], timeout=timeout)
    fn = (step := run.import_step()) and run.need(step, "residual_step", BOOK)
    if fn is None:
        return run.finish("needs residual_step")
    if run.book:  # adapter: the book's function only adds; ln and the sub-layer are wired around it
        add = fn

        def fn(x, ln, sublayer):
            return add(x, sublayer(ln(x)))
        run.names.insert(0, "LayerNorm")
        run.add(_layer_norm_part(path, checkpoint, timeout))
    modules = reference_modules(checkpoint, run)
    block = Block(checkpoint, checkpoint.layer)
    halves = {
        "attention half": (refs["block_in"], modules["ln_1"], modules["attn"], refs["ln_2_in"], block.ln_1, block.attn),
        "MLP half": (refs["ln_2_in"], modules["ln_2"], modules["mlp"], refs["block_out"], block.ln_2, block.mlp),
    }
    for name, (x, ln, sublayer, want, ln_np, sub_np) in halves.items():
        run.run_part(name, lambda x, ln=ln, sublayer=sublayer: fn(x, ln, sublayer), (x,), want, AXES, CATALOGUE,
                     (ln_np, sub_np), what="residual_step",
                     localise=lambda got, x=x: residual(run, fn, x.astype("float64")))
    return run.finish()


def _probe_module(step, checkpoint, run):
    modules = reference_modules(checkpoint, run)
    residual_step = step.residual_step

    def forward(self, x):
        return residual_step(x, self.ln_1, self.attn)

    return wrapping(forward, ln_1=modules["ln_1"], attn=modules["attn"])


PROBE = Probe("08", "residual_step", _probe_module, lambda r: [(r["block_in"], TOKENS)], lambda r: r["ln_2_in"],
              ("sequences", "positions", ""))
