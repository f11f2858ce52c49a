"""Step 10: the learner's GPT2Model against Hugging Face's last hidden state.

Parts: the learner's earlier steps the model uses, construction (every
`transformer.*` weight loads by name), and forward on the check's token ids.
The learner's own blocks run on MAX's eager interpreter: ~1 s per block here.
"""

from __future__ import annotations

import functools
from pathlib import Path

from checker.diagnosis import model as stream
from checker.diagnosis.compiled import Probe
from checker.harness.deps import earlier_steps_part
from checker.harness.runner import StepRun
from checker.references.block_np import model_of
from checker.references.reference import activations, token_ids
from checker.reporting.compare import WHOLE_MODEL
from checker.reporting.report import Report
from checker.running.tensors import int_tensor
from checker.steps.step10.mistakes import CATALOGUE
from runtime.checkpoints import Checkpoint
from runtime.compiling import BATCH, SEQ
from runtime.loading import BUFFERS, hf_state, load_module

# safetensors is imported inside the functions that use it: importing it takes seconds.

CLASS = "GPT2Model"
AXES = ("sequences", "positions", "")
# The online book's February 2026 step 07 names the body MaxGPT2Model(config); its parameters are
# GPT2Model's (wte, wpe, h.N, ln_f: Embeddings and blocks in a Sequential), so only the name differs.
BOOK = ("MaxGPT2Model", "MaxGPT2Model(config), the body under the name the book gives it")


def body_names(checkpoint: Checkpoint) -> list[str]:
    """The GPT2Model parameter names in `checkpoint`, without `transformer.` and without buffers."""
    from safetensors import safe_open

    with safe_open(checkpoint.path / "model.safetensors", framework="np") as f:
        keys = list(f.keys())
    names = [k.removeprefix("transformer.") for k in keys if not k.startswith("lm_head.")]
    return sorted(n for n in names if not n.endswith(BUFFERS))


# Each computes the last hidden state [B, T, C] with the mistake from `model`,
# a function that returns the numpy GPT-2 (built only when a mistake is needed), and the ids.
def check(path: Path, checkpoint: Checkpoint, *, timeout: float = 300.0) -> Report:
    refs = activations(checkpoint)
    _, inputs = token_ids(checkpoint)
    config = checkpoint.learner_config()
    run = StepRun("10", CLASS, path, checkpoint, f"{inputs}; float32, {WHOLE_MODEL}",
                  ["earlier steps", "construction", "forward"], timeout=timeout)
    step = run.import_step()
    cls = step and run.need(step, CLASS, BOOK)
    if cls is None:
        return run.finish(f"needs {CLASS}")
    run.add(earlier_steps_part(step, checkpoint, timeout=timeout))
    state = hf_state(checkpoint, "transformer.", body_names(checkpoint))
    ids = refs["ids"]
    module = run.construct(
        lambda: cls(config), state,
        f"wte, wpe, h.0-h.{config.n_layer - 1}, ln_f: {len(state)} of GPT-2's tensors loaded",
        try_forward=lambda m: m(int_tensor(ids)))
    if module is None:
        return run.finish("needs construction to pass (the weights must load)")
    fwd = run.run_part("forward", lambda: module(int_tensor(ids)), (), refs["last_hidden"], AXES,
                       CATALOGUE, (functools.partial(model_of, checkpoint), ids), tol=WHOLE_MODEL,
                       localise=lambda got: stream.model(run, module, ids, refs))
    run.point_to_earlier_steps(fwd)
    return run.finish()


def _probe_module(step, checkpoint, run):
    cls = getattr(step, "GPT2Model", None) or step.MaxGPT2Model  # the online book's February 2026 name
    return load_module(run, lambda: cls(checkpoint.learner_config()),
                       hf_state(checkpoint, "transformer.", body_names(checkpoint)))


PROBE = Probe("10", "GPT2Model", _probe_module, lambda r: [(r["ids"], (BATCH, SEQ))], lambda r: r["last_hidden"],
              ("sequences", "positions", ""), WHOLE_MODEL)
