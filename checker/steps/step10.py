"""Step 10: the learner's GPT2Model against Hugging Face's last hidden state.

Parts: the learner's earlier steps the model uses, construction (every
`transformer.*` weight loads by name), and forward on the check's token ids.
The learner's own blocks run on MAX's eager interpreter: ~1 s per block here.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from checker.references.block_np import model_of
from checker.reporting.compare import WHOLE_MODEL, Mistake
from checker.harness.deps import earlier_steps_part
from checker.diagnosis import localise
from checker.running.loading import BUFFERS, hf_state, load_module
from checker.references.reference import activations, token_ids
from checker.reporting.report import Report
from checker.harness.runner import StepRun
from checker.running.tensors import int_tensor
from checker.references.weights import Checkpoint
from checker.registry import Step, register
from checker.diagnosis.compiled import BATCH, SEQ, Probe

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


def _reversed(model) -> range:
    return range(len(model.blocks) - 1, -1, -1)


# Each computes the last hidden state [B, T, C] with the mistake from `model`,
# a function that returns the numpy GPT-2 (built only when a mistake is needed), and the ids.
CATALOGUE = [
    Mistake("model-no-ln-f", "ln_f was not applied at the end", "finish with self.ln_f(...)",
            lambda model, ids: model().hidden(ids, ln_f=False)),
    Mistake("model-ln-f-every-block", "ln_f was applied after every block instead of once at the end",
            "ln_f runs once, after the last block", lambda model, ids: model().hidden(ids, ln_f="each")),
    Mistake("model-no-positions", "the position embeddings were not added",
            "add self.wpe's [T, C] to the token embeddings", lambda model, ids: model().hidden(ids, positions=False)),
    Mistake("model-embeddings-scaled", "the token embeddings were multiplied by sqrt(n_embd)",
            "GPT-2 adds the table rows as they are",
            lambda model, ids: model().hidden(ids, scale=np.sqrt(model().wte.shape[1]))),
    Mistake("model-blocks-reversed", "the blocks ran from the last down to h.0", "run h.0 first",
            lambda model, ids: model().hidden(ids, order=_reversed(model()))),
    Mistake("model-one-block", "only the first block ran", "run every block of self.h, in order",
            lambda model, ids: model().hidden(ids, order=[0])),
    Mistake("model-last-block-only", "each block read the embeddings, not the previous block's output",
            "feed each block's output to the next",
            lambda model, ids: model().hidden(ids, order=[len(model().blocks) - 1])),
]


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
        lambda: cls(config), state, f"wte, wpe, h.0-h.{config.n_layer - 1}, ln_f: {len(state)} of GPT-2's tensors loaded",
        try_forward=lambda m: m(int_tensor(ids)))
    if module is None:
        return run.finish("needs construction to pass (the weights must load)")
    fwd = run.run_part("forward", lambda: module(int_tensor(ids)), (), refs["last_hidden"], AXES,
                       CATALOGUE, (functools.partial(model_of, checkpoint), ids), tol=WHOLE_MODEL,
                       localise=lambda got: localise.model(run, module, ids, refs))
    run.point_to_earlier_steps(fwd)
    return run.finish()


def _probe_module(step, checkpoint, run):
    cls = getattr(step, "GPT2Model", None) or step.MaxGPT2Model  # the online book's February 2026 name
    return load_module(run, lambda: cls(checkpoint.learner_config()),
                       hf_state(checkpoint, "transformer.", body_names(checkpoint)))


PROBE = Probe("10", "GPT2Model", _probe_module, lambda r: [(r["ids"], (BATCH, SEQ))], lambda r: r["last_hidden"],
              ("sequences", "positions", ""), WHOLE_MODEL)


register(Step("10", check, CATALOGUE, reads=("GPT2Model", "MaxGPT2Model"), probe=PROBE))
