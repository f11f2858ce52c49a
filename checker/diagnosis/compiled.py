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
import sys
import time
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from checker import registry
from checker.references.weights import Checkpoint
from checker.reporting.compare import ONE_LAYER, Tolerance, Verdict, compare
from checker.running.learner import LearnerError
from checker.running.loading import hf_state, load_module, stored_tensors

# Symbolic dimension names, by the meaning of an axis.
BATCH, HEADS, SEQ, PAST = "batch", "heads", "seq", "past"
TOKENS = (BATCH, SEQ, None)  # [B, T, C]: the width stays fixed


def _dims(array: np.ndarray, names: tuple) -> list:
    """The input type's shape: a name where the axis is symbolic, the size where it is fixed."""
    return [name if name else size for name, size in zip(names, array.shape)]


def compile_module(module, inputs: list[tuple[np.ndarray, tuple]]):
    """`module.compile` for inputs given as (example array, axis names); None in names keeps a size."""
    from max.driver import CPU
    from max.dtype import DType
    from max.graph import TensorType

    types = [TensorType(DType.from_numpy(a.dtype), _dims(a, names), device=CPU()) for a, names in inputs]
    return module.compile(*types)


def run_compiled(compiled, arrays: list[np.ndarray]) -> list[np.ndarray]:
    from max.experimental.tensor import Tensor

    out = compiled(*(Tensor.from_dlpack(np.ascontiguousarray(a)) for a in arrays))
    return [np.from_dlpack(o).astype(np.float64) for o in (out if isinstance(out, (tuple, list)) else [out])]


def load_gpt2(model_cls, load_hf_weights, checkpoint: Checkpoint):
    """`model_cls(config)` with the checkpoint loaded by `load_hf_weights`."""
    from max.experimental import functional as F

    with F.lazy():
        model = model_cls(checkpoint.learner_config())
    load_hf_weights(model, stored_tensors(checkpoint))
    return model


def compile_gpt2(model, *, quiet: bool = False):
    """A loaded GPT2LMHeadModel compiled for int64 ids [batch, seq] (both symbolic), as `pixi run gpt2` runs it."""
    started = time.perf_counter()
    if not quiet:
        print("Compiling the model into one MAX graph (~2 s when cached; 1-3 min after a change)...",
              file=sys.stderr, flush=True)
    compiled = compile_module(model, [(np.zeros((1, 1), np.int64), (BATCH, SEQ))])
    if not quiet:
        print(f"...compiled in {time.perf_counter() - started:.1f} s.", file=sys.stderr, flush=True)
    return compiled


def cache_input(config) -> tuple[np.ndarray, tuple]:
    """One cache input of a model with a KV cache: float32 [batch, H, past, D], batch and past symbolic."""
    return np.zeros((1, config.n_head, 0, config.n_embd // config.n_head), np.float32), (BATCH, None, PAST, None)


def compile_with_cache(module, config, *, seq: str | None = SEQ):
    """`module` (a GPT2WithCache around a loaded GPT2LMHeadModel) compiled as `pixi run gpt2` runs it:
    int64 ids [batch, seq] and 2L float32 caches [batch, H, past, D], all three symbolic (`seq=None`:
    one position, for a decode-only graph)."""
    ids = (np.zeros((1, 1), np.int64), (BATCH, seq))
    return compile_module(module, [ids] + [cache_input(config)] * (2 * config.n_layer))


def greedy_with_cache(run, cache: list, input_ids: np.ndarray, steps: int) -> tuple[np.ndarray, float]:
    """Greedy generation through `run` (a model with a KV cache, compiled): input_ids [B, T] and its
    empty cache 2L x [B, H, 0, D] -> new ids [B, steps + 1], and the seconds of the `steps`
    one-position steps alone (the prompt's pass gives the first new token, untimed)."""
    from max.experimental.tensor import Tensor

    logits, *cache = run(Tensor.from_dlpack(np.ascontiguousarray(input_ids, dtype=np.int64)), *cache)
    new = [np.from_dlpack(logits).argmax(axis=-1)[:, None].astype(np.int64)]  # [B, 1]
    started = time.perf_counter()
    for _ in range(steps):
        logits, *cache = run(Tensor.from_dlpack(new[-1]), *cache)
        new.append(np.from_dlpack(logits).argmax(axis=-1)[:, None].astype(np.int64))
    return np.concatenate(new, axis=1), time.perf_counter() - started


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
