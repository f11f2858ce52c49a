"""Step 13: the learner's KV cache, against Hugging Face's logits position by position.

The learner's step 11 model, loaded with the learner's loader, is wrapped in
their GPT2WithCache. Parts:

  empty cache           empty_cache(config, 2): 2L tensors [2, H, 0, D], float32
  attention with cache  attention_with_cache on block L of that model: the prompt (P=0, T=10), a
                        chunk after a cache (P=7, T=3) and one token (P=9, T=1); the output and
                        the grown keys and values against Hugging Face's
  model with cache      GPT2WithCache run op by op: 7 tokens at once, then 3 more on their cache;
                        the last position's logits and the cache's shapes; off, the first piece of one
                        sequence's stream that differs from Hugging Face's (checker.diagnosis.stream)
  compiled              compiled as `pixi run gpt2` runs it (batch, length and cache length
                        symbolic), at batch 2 and batch 1: the 10 check tokens at once, then
                        EXTRA_TOKENS more one at a time, each step's logits against Hugging Face's
  generate              generate_with_cache on the compiled model: generate's greedy ids; the prompt
                        run once, then one position per token, the cache passed back
  eos, seeded sampling  as step 12's generate, on a scripted model with a cache
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import numpy as np

from checker.diagnosis.compiled import diagnose
from checker.diagnosis.stream import place_positions, recording
from checker.harness.deps import used_modules
from checker.harness.runner import StepRun, mistake_outputs
from checker.references.block_np import model_of
from checker.references.reference import (
    EXTRA_TOKENS,
    NEW_TOKENS,
    PROMPT,
    activations,
    greedy_continuation,
    long_sequences,
)
from checker.reporting.compare import DECODE, WHOLE_MODEL, Mistake, compare
from checker.reporting.report import FAIL, PASS, Part, Report
from checker.running.tensors import int_tensor, tensor, to_numpy
from checker.steps.step12.check import ScriptedModel, eos_part, first_difference, generation, seeded_part
from checker.steps.step13.mistakes import (
    CACHE_AFTER_NEW,
    CACHE_NOT_APPENDED,
    CACHE_NOT_PASSED,
    KV_SWAPPED,
    MASK_NOT_SYMBOLIC,
    MODEL_MISTAKES,
    OUTPUT_MISTAKES,
    PROMPT_BY_TOKEN,
    RECOMPUTES,
    SHARED_ACROSS_BATCH,
    SPLIT,
)
from runtime.checkpoints import Checkpoint
from runtime.compiling import compile_with_cache, load_gpt2
from runtime.hf import load_hf_model
from runtime.learner import LearnerError
from runtime.loading import require_module
from runtime.tokenizer import tokenizer_of

# MAX is imported inside the functions that use it: importing it takes seconds.

FUNCTIONS = ("empty_cache", "attention_with_cache", "GPT2WithCache", "generate_with_cache")
GENERATE_PARTS = ["generate", "eos", "seeded sampling"]
PARTS = ["earlier steps", "empty cache", "attention with cache", "model with cache", "compiled", *GENERATE_PARTS]
CASES = ((0, 10), (7, 3), (9, 1))  # (cached positions P, new positions T) for the attention part


def prepare(checkpoint: Checkpoint) -> None:
    activations(checkpoint)
    long_sequences(checkpoint)
    greedy_continuation(checkpoint, tokenizer_of(checkpoint).encode(PROMPT).ids)


def _outputs(value, n: int, what: str) -> list[np.ndarray]:
    """The n tensors `what` returned (a tuple or list), as float64 numpy, or a LearnerError."""
    if not isinstance(value, (tuple, list)):
        raise LearnerError(f"{what} returned {type(value).__name__}; return a tuple of {n} tensors")
    if len(value) != n:
        raise LearnerError(f"{what} returned {len(value)} values, expected {n}")
    return [to_numpy(v, f"{what}'s value {i}") for i, v in enumerate(value)]


def check(path: Path, checkpoint: Checkpoint, *, timeout: float = 300.0) -> Report:
    refs = activations(checkpoint)
    config = checkpoint.learner_config()
    run = StepRun("13", "KV cache", path, checkpoint,
                  f"the check's 2 sequences x 10 tokens, then {EXTRA_TOKENS} more one at a time; float32, "
                  f"logits {WHOLE_MODEL} (compiled, token by token: {DECODE})", PARTS, timeout=timeout)
    if (opened := run.import_functions(FUNCTIONS, checkpoint)) is None:
        return run.finish("needs " + ", ".join(FUNCTIONS))
    step, fns = opened
    run.add(_empty_cache_part(run, fns["empty_cache"], config))
    model = _model(run, used_modules(step).get("11"), checkpoint)

    def written(parts: list[str], fn) -> None:  # TODO parts for what is not written yet
        run.todo_only([p for p in parts if p not in {q.name for q in run.report.parts}], fn)

    generate_written = (GENERATE_PARTS, lambda: next(iter(fns["generate_with_cache"](None, config, [0], 1))))
    if model is None:  # the pieces cannot run; say at least which are still TODO
        written(["attention with cache"], lambda: fns["attention_with_cache"](None, None, None, None))
        written(["model with cache"], lambda: fns["GPT2WithCache"](None)(None))
        written(*generate_written)
        return run.finish("needs your step 11 model loaded")
    run.add(_attention_part(run, fns["attention_with_cache"], model.transformer.h[checkpoint.layer].attn, refs,
                            config.n_head))
    cached = None
    try:
        cached = require_module(run.call(fns["GPT2WithCache"], model))
    except LearnerError as e:
        run.add(Part.from_error("model with cache", e))
    if cached is not None and all(p.status == PASS for p in run.report.parts[1:]):
        run.add(_model_part(run, cached, fns["empty_cache"], config, checkpoint, refs))
    elif cached is not None:
        empty = [tensor(np.zeros((1, config.n_head, 0, config.n_embd // config.n_head)))] * (2 * config.n_layer)
        written(["model with cache"], lambda: cached(int_tensor(refs["ids"][:1, :1]), *empty))
    run.point_to_earlier_steps(run.report.parts[-1])
    compiled = None
    if all(p.status == PASS for p in run.report.parts):
        compiled = _compiled_part(run, step, cached, fns["empty_cache"], config, checkpoint, refs)
    if compiled is None:
        written(*generate_written)
        return run.finish("runs once the parts above pass")
    _generate_parts(run, fns["generate_with_cache"], compiled, config, checkpoint)
    return run.finish()


def _model(run: StepRun, eleven, checkpoint: Checkpoint):
    """The learner's step 11 model with the checkpoint loaded by their loader; None when it cannot be
    (a FAIL part says why, unless the earlier-steps part already does)."""
    if eleven is None:
        run.add(Part("attention with cache", FAIL, "step 13 wraps your step 11 model: import GPT2LMHeadModel "
                     "and load_hf_weights from steps.step_11"))
        return None
    try:
        return run.call(load_gpt2, eleven.GPT2LMHeadModel, eleven.load_hf_weights, checkpoint)
    except LearnerError as e:
        if run.report.parts[0].status == PASS:
            run.add(Part("attention with cache", FAIL, f"your step 11 model could not be loaded: {e}"))
        return None


def _empty_cache_part(run: StepRun, empty_cache, config) -> Part:
    name, B, D = "empty cache", 2, config.n_embd // config.n_head
    want = [B, config.n_head, 0, D]
    try:
        cache = run.call(empty_cache, config, B)
        arrays = _outputs(cache, 2 * config.n_layer, "empty_cache(config, 2)")
    except LearnerError as e:
        return Part.from_error(name, e)
    wrong = next((a for a in arrays if list(a.shape) != want), None)
    if wrong is None:
        return Part(name, PASS, f"{2 * config.n_layer} tensors {want}, float32: keys and values of "
                    f"{config.n_layer} layers", margin=0.0)
    if list(wrong.shape) == [1, *want[1:]]:
        return Part(name, FAIL, f"empty_cache(config, 2) gave {list(wrong.shape)}, expected {want}: every sequence of "
                    "a batch needs its own cache", mistake=SHARED_ACROSS_BATCH)
    return Part(name, FAIL, f"empty_cache(config, 2) gave {list(wrong.shape)}, expected {want} ([B, H, 0, D]: "
                "batch, heads, no positions yet, head size)")


def _attention_part(run: StepRun, attention_with_cache, attn, refs: dict, H: int) -> Part:
    """attention_with_cache on each of CASES, against Hugging Face's layer: output, then keys and values."""
    name = "attention with cache"
    p = {k: refs[k].astype(np.float64) for k in ("c_attn_weight", "c_attn_bias", "c_proj_weight", "c_proj_bias")}
    verdicts = []
    for P, T in CASES:
        x, pk, pv = _case_inputs(refs, P, T)
        case = f"P={P} cached, T={T} new"
        try:
            out, key, value = _outputs(run.call(attention_with_cache, attn, tensor(x), tensor(pk), tensor(pv)), 3,
                                       "attention_with_cache")
        except LearnerError as e:
            return Part.from_error(name, e) if e.todo else Part(name, FAIL, f"{case}: {e}")
        want_k, want_v = refs["k"][:, :, :P + T], refs["v"][:, :, :P + T]
        inputs = [a.astype(np.float64) for a in (x, pk, pv)] + [p, H]
        axes = ("sequences", "heads", "positions", "")
        if P and key.shape[-2] == T and want_k.shape[-2] == P + T:
            return Part(name, FAIL, f"{case}: the keys returned have {T} positions, expected {P + T}",
                        mistake=CACHE_NOT_APPENDED)
        if key.shape == want_k.shape and compare(key, want_v, axes=axes, mistakes=[]).ok \
                and compare(value, want_k, axes=axes, mistakes=[]).ok:
            return Part(name, FAIL, f"{case}: the keys returned are the values", mistake=KV_SWAPPED)
        for i, what, got, want in ((1, "keys", key, want_k), (2, "values", value, want_v)):
            # mistakes are computed only when the comparison fails
            v = compare(got, want, axes=axes, mistakes=((m, out[i]) for m, out in
                                                          mistake_outputs([CACHE_AFTER_NEW], *inputs)))
            if not v.ok:
                return Part(name, FAIL, f"{case}, the {what} returned: {v.summary}", v.details, v.mistake, v.margin)
        v = compare(out, refs["attn"][:, P:P + T], axes=("sequences", "positions", ""),
                    mistakes=mistake_outputs(OUTPUT_MISTAKES, *inputs))
        if not v.ok:
            return Part(name, FAIL, f"{case}, the output: {v.summary}",
                        v.details + ([] if v.mistake else _outputs_by_case(run, attention_with_cache, attn, refs)),
                        v.mistake, v.margin)
        verdicts.append(v)
    worst = max(verdicts, key=lambda v: v.margin or 0.0)
    shown = ", ".join(f"P={P} T={T}" for P, T in CASES)
    return Part(name, PASS, f"{shown}: output, keys and values; worst {worst.summary}", margin=worst.margin)


def _case_inputs(refs: dict, P: int, T: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """attention_with_cache's inputs for a case of CASES: T new rows of ln_1 [B, T, C] after P cached positions,
    and those positions' keys and values [B, H, P, D]."""
    return refs["ln_1"][:, P:P + T], refs["k"][:, :, :P], refs["v"][:, :, :P]


def _outputs_by_case(run: StepRun, attention_with_cache, attn, refs: dict) -> list[str]:
    """Which of CASES attention_with_cache's output is right on, when some are: a line saying so, and when exactly
    those with one new position are, what differs with more."""
    right = {}
    for P, T in CASES:
        try:
            out = _outputs(run.call(attention_with_cache, attn, *map(tensor, _case_inputs(refs, P, T))), 3,
                           "attention_with_cache")[0]
        except LearnerError:
            return []
        right[P, T] = compare(out, refs["attn"][:, P:P + T], axes=(), mistakes=[]).ok
    if not any(right.values()):
        return []
    line = ("the output is right at " + ", ".join(f"P={P} T={T}" for (P, T), ok in right.items() if ok)
            + "; off at " + ", ".join(f"P={P} T={T}" for (P, T), ok in right.items() if not ok))
    if all(ok == (T == 1) for (_, T), ok in right.items()):
        line += (": right with one new position only, so what differs with more (the heads merged back, [B, H, T, "
                 "D] moved to [B, T, H, D] before the reshape; the mask among the new positions)")
    return [line]


def _step(fn, ids: np.ndarray, cache: list, n_layer: int, what: str) -> tuple[np.ndarray, list]:
    """One call of a model with a cache: ids [B, T] -> (logits [B, V] as float64, the new cache)."""
    out = fn(int_tensor(ids), *cache)
    if not isinstance(out, (tuple, list)) or len(out) != 1 + 2 * n_layer:
        got = f"{len(out)} values" if isinstance(out, (tuple, list)) else type(out).__name__
        raise LearnerError(f"{what} returned {got}; expected (logits, *cache): 1 + {2 * n_layer} tensors")
    return to_numpy(out[0], what), list(out[1:])


def _model_part(run: StepRun, cached, empty_cache, config, checkpoint: Checkpoint, refs: dict) -> Part:
    """SPLIT tokens at once, then the rest on their cache, run op by op: last-position logits and cache shapes."""
    name, ids, L = "model with cache", refs["ids"], config.n_layer
    B, T = ids.shape
    try:
        first, cache = run.call(_step, cached, ids[:, :SPLIT], run.call(empty_cache, config, B), L, "GPT2WithCache")
        logits, cache = run.call(_step, cached, ids[:, SPLIT:], cache, L, "GPT2WithCache")
    except LearnerError as e:
        return Part.from_error(name, e)
    V = refs["logits"].shape[-1]
    for got, at in ((first, SPLIT - 1), (logits, T - 1)):
        if got.ndim == 3:
            return Part(name, FAIL, f"logits {list(got.shape)}, expected [{B}, {V}]: return only the last "
                        "position's logits, [:, -1]: the next token's scores")
    v = compare(first, refs["logits"][:, SPLIT - 1], axes=("sequences", ""), mistakes=[], tol=WHOLE_MODEL)
    if not v.ok:
        return Part(name, FAIL, f"{SPLIT} tokens, empty cache: {v.summary}",
                    v.details + _placed(run, cached, empty_cache, config, checkpoint, ids[0]), v.mistake, v.margin)
    numpy_model = functools.partial(model_of, checkpoint)
    mistakes = mistake_outputs(MODEL_MISTAKES, numpy_model, ids)
    v = compare(logits, refs["logits"][:, T - 1], axes=("sequences", ""), mistakes=mistakes, tol=WHOLE_MODEL)
    setting = f"{SPLIT} tokens at once, then {T - SPLIT} on their cache, op by op"
    if not v.ok:
        where = [] if v.mistake else _placed(run, cached, empty_cache, config, checkpoint, ids[0])
        return Part(name, FAIL, f"{setting}, the last position's logits: {v.summary}", v.details + where, v.mistake,
                    v.margin)
    want_shape = [B, config.n_head, T, config.n_embd // config.n_head]
    shapes = {tuple(int(d) for d in c.shape) for c in cache}
    if shapes != {tuple(want_shape)}:
        return Part(name, FAIL, f"after {SPLIT} + {T - SPLIT} tokens the cache holds {sorted(shapes)}, "
                    f"expected {2 * L} tensors {want_shape}", mistake=CACHE_NOT_APPENDED)
    if layout := _layout_problem(cache, refs, checkpoint.layer):
        return Part(name, FAIL, f"{setting}: logits right; {layout}")
    return Part(name, PASS, f"{setting}: logits {v.summary}; cache {2 * L} x {want_shape}", margin=v.margin)


def _layout_problem(cache: list, refs: dict, layer: int) -> str | None:
    """What is wrong with where the cache holds block `layer`'s keys and values (Hugging Face's, refs k and v
    [B, H, T, D]), which the later steps read at 2 x layer and 2 x layer + 1; None when they are there."""
    def holds(i: int, want: np.ndarray) -> bool:
        return compare(to_numpy(cache[i], "a cache tensor"), want, axes=(), mistakes=[], tol=WHOLE_MODEL).ok

    if holds(2 * layer, refs["k"]) and holds(2 * layer + 1, refs["v"]):
        return None
    keys, values = ([i for i in range(len(cache)) if holds(i, want)] for want in (refs["k"], refs["v"]))
    found = ", ".join(f"its {what} at cache[{where[0]}]" for what, where in (("keys", keys), ("values", values))
                      if where)
    return (f"the cache does not hold block {layer}'s keys at cache[{2 * layer}] and its values at "
            f"cache[{2 * layer + 1}]{f' ({found})' if found else ''}: the cache is k_0, v_0, k_1, v_1, ...: block "
            "i's keys at 2i, its values at 2i + 1, the order later steps read it in")


def _placed(run: StepRun, cached, empty_cache, config, checkpoint: Checkpoint, ids: np.ndarray) -> list[str]:
    """Where the model with a cache first differs from Hugging Face on one sequence `ids` [T]: its first SPLIT
    tokens at once, then the rest on their cache, op by op, each block's input and output recorded (one
    line, or none when the pieces cannot be recorded)."""
    recorded, L = [], config.n_layer
    try:
        with recording(recorded, cached):
            _, cache = run.call(_step, cached, ids[None, :SPLIT], run.call(empty_cache, config, 1), L, "GPT2WithCache")
            run.call(_step, cached, ids[None, SPLIT:], cache, L, "GPT2WithCache")
    except LearnerError:
        return []
    alone = any(p.name == "attention with cache" and p.status == PASS for p in run.report.parts)
    return place_positions(recorded, load_hf_model(checkpoint), ids.tolist(), 0, SPLIT, L, attention=lambda i: (
        f"what forward hands attention_with_cache, which passes its own part (ln_1(x), and this block's cache "
        f"entries: cache[{2 * i}] and cache[{2 * i + 1}])" if alone else
        "attention_with_cache (the keys and values of earlier positions it reads back from this block's cache, "
        "the new ones it adds, the mask's offset, the scale)"))


def _compiled_part(run: StepRun, step, cached, empty_cache, config, checkpoint: Checkpoint, refs: dict):
    """GPT2WithCache compiled with batch, length and cache length symbolic; returns the compiled model."""
    long = long_sequences(checkpoint)
    ids, want = long["ids"], long["logits"]
    T = refs["ids"].shape[1]
    print("(compiling your model with its cache into one graph, as pixi run gpt2 does: 1-3 min after a change "
          "to its code, ~2 s when unchanged)", file=sys.stderr, flush=True)
    try:
        compiled = run.call(compile_with_cache, cached, config)
    except LearnerError as e:
        mistake = MASK_NOT_SYMBOLIC if "SymbolicDim" in str(e) and "band_part" in str(e) else None
        run.add(Part("compiled", FAIL, f"your model with its cache cannot be compiled with a symbolic batch, length "
                     f"and cache length, as pixi run gpt2 compiles it: {e}",
                     [] if mistake else diagnose(used_modules(step), checkpoint, refs, run, e), mistake))
        return None
    verdicts = []
    for rows in (slice(0, 2), slice(1, 2)):  # batch 2, then the second sequence alone
        part_ids = ids[rows]
        try:
            steps = [run.call(_step, compiled, part_ids[:, :T], run.call(empty_cache, config, part_ids.shape[0]),
                              config.n_layer, "the compiled GPT2WithCache")]
            for i in range(T, ids.shape[1]):
                steps.append(run.call(_step, compiled, part_ids[:, i:i + 1], steps[-1][1], config.n_layer,
                                      "the compiled GPT2WithCache"))
        except LearnerError as e:
            run.add(Part("compiled", FAIL, f"batch {part_ids.shape[0]}: {e}"))
            return None
        got = np.stack([logits for logits, _ in steps], axis=1)  # [B, 1 + EXTRA_TOKENS, V]
        verdicts.append(compare(got, want[rows, T - 1:], axes=("sequences", "steps (0 = the prompt)", ""),
                                mistakes=[], tol=DECODE))
    worst = max(verdicts, key=lambda v: (not v.ok, v.margin or 0.0))
    summary = (f"batch 2 and 1: {T} tokens at once, then {EXTRA_TOKENS} one at a time, each step's logits; "
               f"symbolic batch, length and cache length: {worst.summary}")
    if not worst.ok:
        run.add(Part("compiled", FAIL, summary, [*worst.details, "run op by op your model is right (the parts above "
                     "pass): what changes is how MAX compiles it"], margin=worst.margin))
        return None
    run.add(Part("compiled", PASS, summary, margin=worst.margin))
    return compiled


class Recorder:
    """Wraps a model with a cache, recording each call's (new positions T, cached positions P)."""

    def __init__(self, model):
        self.model, self.calls = model, []

    def __call__(self, ids, *cache):
        self.calls.append((int(ids.shape[-1]), int(cache[0].shape[-2]) if cache else -1))
        return self.model(ids, *cache)


class ScriptedCachedModel(ScriptedModel):
    """Step 12's scripted logits behind a cached model's signature: (ids [1, T], *cache) ->
    (logits [1, V], *cache grown by T positions of zeros)."""

    def __call__(self, ids, *cache):
        from max.experimental.tensor import Tensor

        T, P = int(ids.shape[-1]), int(cache[0].shape[-2])
        logits = np.from_dlpack(super().__call__(np.zeros((1, P + T))))[:, -1]  # [1, V]
        grown = [Tensor.from_dlpack(np.zeros((*(int(d) for d in c.shape[:-2]), P + T, int(c.shape[-1])), np.float32))
                 for c in cache]
        return (Tensor.from_dlpack(np.ascontiguousarray(logits)), *grown)


def _calls_problem(calls: list[tuple[int, int]], prompt_length: int) -> tuple[str, Mistake] | None:
    """What is wrong with the sequence of (T, P) calls generate made, if anything."""
    if calls[0] != (prompt_length, 0):
        T, P = calls[0]
        if T == 1:
            return f"the first call got {T} token, expected the whole prompt ({prompt_length})", PROMPT_BY_TOKEN
        return f"the first call got {T} tokens and a cache of {P}, expected {prompt_length} and 0", RECOMPUTES
    for i, ((T, P), (t0, p0)) in enumerate(zip(calls[1:], calls), start=1):
        if T != 1:
            return f"call {i} got {T} tokens (cache {P}), expected 1", RECOMPUTES
        if P != p0 + t0:
            return f"call {i} got a cache of {P} positions, expected {p0 + t0}", CACHE_NOT_PASSED
    return None


def _greedy_part(greedy: list[int], calls: list[tuple[int, int]], prompt: list[int], want: list[int]) -> Part:
    """generate_with_cache's greedy ids against Hugging Face's, and how it called the model (`calls`)."""
    problem = _calls_problem(calls, len(prompt)) if calls else ("the model was never called", None)
    if problem:
        return Part("generate", FAIL, f"{problem[0]} (calls as (new tokens, cached positions): {calls[:4]}...)",
                    mistake=problem[1])
    if greedy != want:
        return Part("generate", FAIL, "greedy on your compiled model with its cache: "
                    f"{first_difference(greedy, want, len(prompt))}")
    return Part("generate", PASS, f"{NEW_TOKENS} greedy ids equal Hugging Face generate's: {want[:6]}...; the prompt "
                f"({len(prompt)} tokens) once, then 1 position per call, {len(calls)} calls", margin=0.0)


def _generate_parts(run: StepRun, generate_with_cache, compiled, config, checkpoint: Checkpoint) -> None:
    tokenizer = tokenizer_of(checkpoint)
    prompt = tokenizer.encode(PROMPT).ids
    want = greedy_continuation(checkpoint, prompt)

    tokens = generation(run, "generate_with_cache",
                        lambda model, ids, n, **kw: generate_with_cache(model, config, ids, n, **kw))
    recorder = Recorder(compiled)
    try:
        run.add(_greedy_part(tokens(recorder, prompt, NEW_TOKENS), recorder.calls, prompt, want))
    except LearnerError as e:
        run.add(Part.from_error("generate", e))
    loop_fails = run.report.parts[-1].status != PASS
    for name, part in (("eos", lambda: eos_part(tokens, prompt, ScriptedCachedModel)),
                       ("seeded sampling", lambda: seeded_part(tokens, prompt, ScriptedCachedModel))):
        try:
            added = run.add(part())
        except LearnerError as e:
            added = run.add(Part.from_error(name, e))
        if loop_fails and added.status != PASS:  # the same loop: its failure may be this one's cause
            added.details.append("generate_with_cache's loop fails the generate part: fix that first")
