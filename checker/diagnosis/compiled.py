"""The learner's code compiled, as `pixi run gpt2` runs it, and what changes when it is.

The checks run a learner's code op by op (eager), which is fast to re-run.
`pixi run gpt2` compiles the whole model into one MAX graph with a symbolic
batch and length, and a graph can compute something else than the same code
run op by op: MAX 26.7 miscompiles some patterns under symbolic dimensions
(see `checker/max_bugs.py`), and code that needs a concrete length (an
`int()` of a dimension, numpy on a tensor) cannot be compiled at all.

Each step registers a `Probe` (checker.registry): its piece, compiled alone
with the same symbolic dimensions and GPT-2's weights, and compared with
Hugging Face; step 02 and step 07 run their own piece's probe as a part, step
11 compiles the whole model and, when the graph is wrong, `diagnose` runs the
probe of every step the model uses and names the first (in the order they
build on each other) whose compiled piece differs.

Compiling a new graph takes ~15 s for a piece and ~40-80 s for the whole model
on 2 cores; MAX caches graphs on disk, so an unchanged one loads in ~2 s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from checker import registry
from checker.reporting.compare import ONE_LAYER, Tolerance, Verdict, compare
from runtime.checkpoints import Checkpoint
from runtime.compiling import compile_module, run_compiled
from runtime.learner import LearnerError
from runtime.loading import hf_state, load_module

# MAX is imported inside the functions that use it: importing it takes seconds.


@dataclass
class Probe:
    """One step's piece, compiled alone: what it is, how to build it, what it must give."""

    step: str
    what: str  # "causal_mask", "GPT2MultiHeadAttention", ...
    build: object  # (learner's step module, checkpoint, run) -> a Module whose forward takes `inputs`
    inputs: object  # refs -> [(array, axis names)]
    want: object  # refs -> the reference output
    axes: tuple  # names of the output's axes, for where it differs
    tol: Tolerance = ONE_LAYER
    mistakes: object = None  # refs -> [(Mistake, its output)], to name what the compiled piece does


def layer_module(run, build, checkpoint: Checkpoint, prefix: str, names: list[str]):
    """`build()` with the checkpoint's layer `checkpoint.layer` loaded: `prefix` + each of `names`."""
    return load_module(run, build, hf_state(checkpoint, f"transformer.h.{checkpoint.layer}.{prefix}", names))


def wrapping(forward, **modules):
    """A Module with `modules` as attributes whose forward is `forward(self, *inputs)`."""
    from max.experimental.nn import Module

    cls = type("CompiledProbe", (Module,), {"forward": forward})
    wrapper = cls()
    for name, module in modules.items():
        setattr(wrapper, name, module)
    return wrapper


def table_module(cls_name: str, table: str):
    """A probe's build for an embedding step: the learner's `cls_name` with GPT-2's `table` loaded
    (wte: ids [B, T] -> [B, T, C]; wpe: asked for ids.shape[-1] positions, a symbolic Dim)."""
    def build(step, checkpoint, run):
        cls = getattr(step, cls_name)
        module = load_module(run, lambda: cls(checkpoint.learner_config()),
                             hf_state(checkpoint, f"transformer.{table}.", ["weight"]))
        if table == "wte":
            return module

        def forward(self, ids):
            return self.wpe(ids.shape[-1])

        return wrapping(forward, wpe=module)

    return build


def probe(step: str, learner_step: ModuleType, checkpoint: Checkpoint, refs: dict, run,
          eager: bool = False) -> Verdict:
    """Compiles step `step`'s piece of `learner_step` with symbolic dimensions and compares it with Hugging Face.

    With `eager`, the same piece runs op by op instead. Raises LearnerError
    when the piece cannot be built, compiled or run.
    """
    from max.experimental.tensor import Tensor

    p = registry.step(step).probe
    module = p.build(learner_step, checkpoint, run)
    inputs = p.inputs(refs)
    arrays = [a for a, _ in inputs]
    if eager:
        got = run.call(lambda: np.from_dlpack(module(*(Tensor.from_dlpack(a) for a in arrays))).astype(np.float64))
    else:
        (got,) = run.call(run_compiled, run.call(compile_module, module, inputs), arrays)
    want = np.asarray(p.want(refs), dtype=np.float64)
    verdict = compare(got, want, axes=p.axes, mistakes=[], tol=p.tol)
    if not verdict.ok and p.mistakes:
        verdict = compare(got, want, axes=p.axes, mistakes=p.mistakes(refs), tol=p.tol)
    return verdict


SYMBOLIC = ("compiled, the batch size and the length are symbols (Dim('batch'), Dim('seq')), not numbers: "
            "Tensor ops take them as they are; int(), range() and numpy of a tensor cannot")


def diagnose(used: dict[str, ModuleType], checkpoint: Checkpoint, refs: dict, run,
             error: LearnerError | None = None) -> list[str]:
    """Lines naming the first of the learner's steps whose piece differs when compiled (or cannot compile).

    `used` maps step numbers to the learner's modules; they are probed in
    order, so the step named is one whose own earlier steps compile right.
    When the whole model could not compile (`error`), the step file the error
    points into is probed first.
    """
    fine = []
    suspect = re.search(r"step_(\d\d)\.py", (error and error.where) or "")
    probes = {number: s.probe for number, s in registry.steps().items() if s.probe}
    order = sorted(s for s in used if s in probes)
    for step in sorted(order, key=lambda s: not suspect or s != suspect.group(1)):
        p = probes[step]
        try:
            verdict = probe(step, used[step], checkpoint, refs, run)
        except LearnerError as e:
            why = "fails the same way" if error and str(e) == str(error) else f"cannot be compiled: {e}"
            return [f"compiled alone, step {step}'s {p.what} {why}", SYMBOLIC, f"look at step {step}: {_fix(step)}"]
        if not verdict.ok:
            try:
                eager = probe(step, used[step], checkpoint, refs, run, eager=True).ok
            except LearnerError:
                eager = False
            how = "though it matches when run op by op" if eager else "and so it does run op by op"
            lines = [f"compiled alone with a symbolic batch and length, step {step}'s {p.what} differs from "
                     f"Hugging Face ({verdict.summary}), {how}", *verdict.details]
            if verdict.mistake:
                lines.append(f"what it does compiled: {verdict.mistake.says}")
            return lines + [f"look at step {step}: {_fix(step)}"]
        fine.append(step)
    checked = ", ".join(sorted(fine)) or "none"
    return [f"compiled one at a time, the pieces of steps {checked} each match Hugging Face; what the model "
            "does between them changes when compiled (look at GPT2LMHeadModel.forward in step 11)"]


def _fix(step: str) -> str:
    return f"pixi run s{step} (python -m checker {step})" + (
        " runs its piece compiled too" if registry.step(step).compiles_in_check else "")
