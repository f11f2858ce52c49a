"""The learner's code compiled, as `pixi run gpt2` runs it, and what changes when it is.

The checks run a learner's code op by op (eager), which is fast to re-run.
`pixi run gpt2` compiles the whole model into one MAX graph with a symbolic
batch and length, and a graph can compute something else than the same code
run op by op: MAX 26.7 miscompiles some patterns under symbolic dimensions
(see `checker/max_bugs.py`), and code that needs a concrete length (an
`int()` of a dimension, numpy on a tensor) cannot be compiled at all.

`PROBES` compiles one step's piece at a time, with the same symbolic
dimensions and GPT-2's weights, and compares it with Hugging Face; step 02
and step 07 run their own piece's probe as a part, step 11 compiles the whole
model and, when the graph is wrong, `diagnose` runs every probe of the steps
the model uses and names the first (in the order they build on each other)
whose compiled piece differs.

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

from checker.compare import EXACT, ONE_LAYER, WHOLE_MODEL, Mistake, Tolerance, Verdict, compare
from checker.learner import LearnerError
from checker.weights import Checkpoint

# Symbolic dimension names, by the meaning of an axis.
BATCH, HEADS, SEQ = "batch", "heads", "seq"


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

    from checker.step11 import stored_tensors

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


def _layer_module(run, build, checkpoint: Checkpoint, prefix: str, names: list[str]):
    from checker.loading import hf_state, load_module

    return load_module(run, build, hf_state(checkpoint, f"transformer.h.{checkpoint.layer}.{prefix}", names))


def _wrapping(forward, **modules):
    """A Module with `modules` as attributes whose forward is `forward(self, *inputs)`."""
    from max.experimental.nn import Module

    cls = type("CompiledProbe", (Module,), {"forward": forward})
    wrapper = cls()
    for name, module in modules.items():
        setattr(wrapper, name, module)
    return wrapper


def _mask_probe_module(step, checkpoint, run):
    mask = step.causal_mask

    def forward(self, scores):  # [B, H, T, T] + [T, T]: the mask as attention uses it
        return scores + mask(scores.shape[-1], 0, dtype=scores.dtype, device=scores.device)

    return _wrapping(forward)


MASK_SCORES = (2, 3, 6, 6)  # [B, H, T, T] zero scores: the output is the mask, broadcast


def _mask_inputs(refs):
    return [(np.zeros(MASK_SCORES, np.float32), (BATCH, HEADS, SEQ, SEQ))]


def _mask_want(refs):
    from checker.step02 import mask

    return np.broadcast_to(mask(MASK_SCORES[-1], 0), MASK_SCORES)


def _mask_mistakes(refs):
    return [(MASK_LOST, np.zeros(MASK_SCORES))]


MASK_LOST = Mistake(
    "compiled-mask-lost",
    "the mask masks nothing (all 0) once compiled with a symbolic length, though it is right op by op: MAX 26.7 "
    "miscompiles an elementwise op between [T, 1] and [1, T] tensors (key <= query, built from arange) when "
    "its result is broadcast over more axes and T is symbolic (python -m checker.max_bugs shows it)",
    "build the mask without comparing a column of positions with a row of them: F.band_part on a "
    "[T, N + T] tensor of -inf does it in one op",
)


def _ln_build(step, checkpoint, run):
    from checker.step03 import build

    config = checkpoint.learner_config()
    return _layer_module(run, lambda: build(step.LayerNorm, config.n_embd, config.layer_norm_epsilon), checkpoint,
                         "ln_1.", ["weight", "bias"])


def _mlp_build(step, checkpoint, run):
    from checker.step04 import build

    return _layer_module(run, lambda: build(step.GPT2MLP, checkpoint.learner_config()), checkpoint, "mlp.",
                         ["c_fc.weight", "c_fc.bias", "c_proj.weight", "c_proj.bias"])


def _attn_build(step, checkpoint, run):
    return _layer_module(run, lambda: step.GPT2MultiHeadAttention(checkpoint.learner_config()), checkpoint, "attn.",
                         ["c_attn.weight", "c_attn.bias", "c_proj.weight", "c_proj.bias"])


def _table_build(cls_name: str, table: str):
    def build(step, checkpoint, run):
        from checker.loading import hf_state, load_module

        cls = getattr(step, cls_name)
        module = load_module(run, lambda: cls(checkpoint.learner_config()),
                             hf_state(checkpoint, f"transformer.{table}.", ["weight"]))
        if table == "wte":
            return module

        def forward(self, ids):  # the model asks for seq_len = input_ids.shape[-1], a symbolic Dim
            return self.wpe(ids.shape[-1])

        return _wrapping(forward, wpe=module)

    return build


def _residual_build(step, checkpoint, run):
    from checker.step08 import reference_modules

    modules = reference_modules(checkpoint, run)
    residual_step = step.residual_step

    def forward(self, x):
        return residual_step(x, self.ln_1, self.attn)

    return _wrapping(forward, ln_1=modules["ln_1"], attn=modules["attn"])


def _block_build(step, checkpoint, run):
    from checker.block_np import NAMES
    from checker.loading import hf_state, load_module

    return load_module(run, lambda: step.GPT2Block(checkpoint.learner_config()),
                       hf_state(checkpoint, f"transformer.h.{checkpoint.layer}.", NAMES))


def _body_build(step, checkpoint, run):
    from checker.loading import hf_state, load_module
    from checker.step10 import body_names

    cls = getattr(step, "GPT2Model", None) or step.MaxGPT2Model  # the online book's February 2026 name
    return load_module(run, lambda: cls(checkpoint.learner_config()),
                       hf_state(checkpoint, "transformer.", body_names(checkpoint)))


def _attn_mistakes(refs):
    from checker.step07 import ATTN_MISTAKES, _forward_with

    params = {k: refs[k].astype(np.float64) for k in ("c_attn_weight", "c_attn_bias", "c_proj_weight", "c_proj_bias")}
    H = refs["q"].shape[1]
    x = refs["ln_1"].astype(np.float64)
    return [(m, m.compute(x, params, H)) for m in (_forward_with("attn", a) for a in ATTN_MISTAKES)]


TOKENS = (BATCH, SEQ, None)  # [B, T, C]: the width stays fixed
PROBES = {p.step: p for p in [
    Probe("02", "causal_mask", _mask_probe_module, _mask_inputs, _mask_want, ("sequences", "heads", "queries", "keys"),
          EXACT, _mask_mistakes),
    Probe("03", "LayerNorm", _ln_build, lambda r: [(r["block_in"], TOKENS)], lambda r: r["ln_1"],
          ("sequences", "positions", "")),
    Probe("04", "GPT2MLP", _mlp_build, lambda r: [(r["ln_2"], TOKENS)], lambda r: r["mlp"],
          ("sequences", "positions", "")),
    Probe("05", "GPT2TokenEmbedding", _table_build("GPT2TokenEmbedding", "wte"),
          lambda r: [(r["ids"], (BATCH, SEQ))], lambda r: r["wte"], ("sequences", "positions", "")),
    Probe("06", "GPT2PositionEmbedding", _table_build("GPT2PositionEmbedding", "wpe"),
          lambda r: [(r["ids"], (BATCH, SEQ))], lambda r: r["wpe"], ("positions", "")),
    Probe("07", "GPT2MultiHeadAttention", _attn_build, lambda r: [(r["ln_1"], TOKENS)], lambda r: r["attn"],
          ("sequences", "positions", ""), ONE_LAYER, _attn_mistakes),
    Probe("08", "residual_step", _residual_build, lambda r: [(r["block_in"], TOKENS)], lambda r: r["ln_2_in"],
          ("sequences", "positions", "")),
    Probe("09", "GPT2Block", _block_build, lambda r: [(r["block_in"], TOKENS)], lambda r: r["block_out"],
          ("sequences", "positions", "")),
    Probe("10", "GPT2Model", _body_build, lambda r: [(r["ids"], (BATCH, SEQ))], lambda r: r["last_hidden"],
          ("sequences", "positions", ""), WHOLE_MODEL),
]}


def probe(step: str, learner_step: ModuleType, checkpoint: Checkpoint, refs: dict, run,
          eager: bool = False) -> Verdict:
    """Compiles step `step`'s piece of `learner_step` with symbolic dimensions and compares it with Hugging Face.

    With `eager`, the same piece runs op by op instead. Raises LearnerError
    when the piece cannot be built, compiled or run.
    """
    from max.experimental.tensor import Tensor

    p = PROBES[step]
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
    order = sorted(s for s in used if s in PROBES)
    for step in sorted(order, key=lambda s: not suspect or s != suspect.group(1)):
        p = PROBES[step]
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
        " runs its piece compiled too" if step in ("02", "07") else "")
