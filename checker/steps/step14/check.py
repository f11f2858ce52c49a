"""Step 14: the learner's served model, against Hugging Face, batch by batch and then by real requests.

Parts:

  earlier steps     the steps this file uses pass their own checks
  ragged positions  ragged_positions on a batch of prompts, decodes and a chunk after a cache (offsets
                    [0, 5, 6, 10, 11, 14], cached [0, 7, 0, 3, 16]): each row's position, exactly
  last rows         last_rows on the same offsets: each request's last row, exactly
  paged model       GPT2Paged (first PAGED_LAYERS blocks) through SCENARIO: requests of different lengths,
                    prefill and decode in one batch, a request sitting a batch out; every new row's logits
                    at each batch against Hugging Face's at the same position. First op by op, MAX's
                    paged-cache kernels stood in for (checker.running.paged: seconds, where a compile after
                    a change takes about a minute), so a wrong model is told at once; a right one is then
                    compiled as max serve compiles it and run on MAX's paged KV cache, the verdict's own run
  served            the whole model under a real `max serve` on 127.0.0.1: greedy completions of
                    PROMPTS equal transformers' greedy ids, streaming the same tokens in order,
                    CONCURRENT requests at once each its single-request answer, the log-probabilities
                    of each prompt's tokens (echo, as evaluation harnesses score text) and of generated
                    tokens with their top 3 against transformers' log_softmax, a request past
                    n_positions and one with invalid parameters answered 4xx while serving goes on

A mistake is named only when the learner's output equals what it computes: Hugging Face run on the
same batches with the mistake's positions, rows, attention scale or output (see MISTAKES).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

from checker.diagnosis.stream import recording
from checker.harness.deps import used_modules
from checker.harness.runner import StepRun
from checker.references.ragged import CHECKED_CACHED, CHECKED_OFFSETS, last_rows, positions
from checker.reporting.compare import EXACT, WHOLE_MODEL, Tolerance, compare
from checker.reporting.report import FAIL, PASS, Part, Report
from checker.running.paged import NotStoodIn, PagedCache, standing_in
from checker.steps.step14.mistakes import MISTAKES, ROW_MISTAKES
from checker.steps.step14.paged import compile_probed, learner_paged, paged_params, place, rows_differ, run_scenario
from checker.steps.step14.reference import (
    PAGED_LAYERS,
    SCENARIO,
    hf_model,
    scenario_logits,
    scenario_rows,
    scenario_stream,
    scenario_tokens,
)
from checker.steps.step14.served import served_part
from runtime import learner
from runtime.checkpoints import Checkpoint
from runtime.learner import LearnerError

# MAX is imported inside the functions that use it: importing it takes seconds.

FUNCTIONS = ("ragged_positions", "last_rows", "paged_attention", "GPT2Paged")
PARTS = ["earlier steps", "ragged positions", "last rows", "paged model", "served"]
# The paged model's logits: PAGED_LAYERS blocks of float32 work, not WHOLE_MODEL's twelve. A right model's worst
# margins, both stand-ins, every style: 0.007 and 0.017 of WHOLE_MODEL, so a third of it keeps them under a tenth;
# the exact (erf) GELU, 0.6 of WHOLE_MODEL here, is then off.
PAGED_MODEL = Tolerance(WHOLE_MODEL.scale / 3, WHOLE_MODEL.rtol / 3)

# --- the check ------------------------------------------------------------------------------------


def serving_enabled() -> bool:
    """The served part starts a real server (20-30 s when compiled, minutes cold); GPT2_CHECK_SERVE=0
    leaves it out (the test suite starts one server per session instead of one per check)."""
    return os.environ.get("GPT2_CHECK_SERVE", "1") != "0"


def check(path: Path, checkpoint: Checkpoint, *, timeout: float = 300.0) -> Report:
    config = checkpoint.learner_config()
    serve = serving_enabled()
    parts = PARTS if serve else PARTS[:-1]
    run = StepRun("14", "serving: ragged batches on MAX's paged KV cache", path, checkpoint,
                  f"ragged batches of 3-4 requests (prompts and decodes mixed), then a real max serve; "
                  f"float32, logits {PAGED_MODEL}" if serve else f"ragged batches of 3-4 requests (prompts and "
                  f"decodes mixed); float32, logits {PAGED_MODEL}; no server (GPT2_CHECK_SERVE=0)", parts,
                  timeout=timeout)
    if (opened := run.import_functions(FUNCTIONS, checkpoint)) is None:
        return run.finish("needs " + ", ".join(FUNCTIONS))
    step, fns = opened
    _positions_part(run, fns["ragged_positions"])
    _last_rows_part(run, fns["last_rows"])
    eleven = used_modules(step).get("11")
    if eleven is None:
        run.add(Part("paged model", FAIL, "step 14 wraps your step 11 model: import GPT2LMHeadModel and "
                     "load_hf_weights from steps.step_11"))
        return run.finish("needs your step 11 model")
    part = _model_part(run, fns["GPT2Paged"], eleven, step, config, checkpoint)
    run.point_to_earlier_steps(part)
    if serve and all(p.status == PASS for p in run.report.parts):
        run.add(served_part(path, checkpoint))
    return run.finish("runs once the parts above pass")


def _positions_part(run: StepRun, ragged_positions) -> Part:
    from max.experimental.tensor import Tensor

    want = positions(CHECKED_OFFSETS, CHECKED_CACHED)
    try:
        got = run.call(ragged_positions, int(CHECKED_OFFSETS[-1]), Tensor.from_dlpack(CHECKED_OFFSETS),
                       Tensor.from_dlpack(CHECKED_CACHED))
        if got is None:
            raise LearnerError("ragged_positions() returned None: is a `return` missing?")
        got = np.from_dlpack(got)
    except LearnerError as e:
        return run.add(Part.from_error("ragged positions", e))
    except Exception as e:  # noqa: BLE001 - not a Tensor
        return run.add(Part("ragged positions", FAIL, f"ragged_positions() returned {type(got).__name__}, "
                            f"not a max Tensor ({e})"))
    outs = [(m, positions(CHECKED_OFFSETS, CHECKED_CACHED, v.positions).astype(np.float64)) for m, v in MISTAKES
            if v.positions != "right"]
    verdict = compare(got.astype(np.float64), want.astype(np.float64), axes=("row",), mistakes=outs, tol=EXACT)
    part = Part.from_verdict("ragged positions", verdict)
    part.summary = f"{part.summary}; got {got.tolist()}, expected {want.tolist()}" if not verdict.ok else \
        f"{want.tolist()} for offsets {CHECKED_OFFSETS.tolist()}, cached {CHECKED_CACHED.tolist()}"
    return run.add(part)


def _last_rows_part(run: StepRun, last_rows_fn) -> Part:
    from max.experimental.tensor import Tensor

    want = last_rows(CHECKED_OFFSETS)
    try:
        got = run.call(last_rows_fn, Tensor.from_dlpack(CHECKED_OFFSETS))
        if got is None:
            raise LearnerError("last_rows() returned None: is a `return` missing?")
        got = np.from_dlpack(got)
    except LearnerError as e:
        return run.add(Part.from_error("last rows", e))
    except Exception as e:  # noqa: BLE001 - not a Tensor
        return run.add(Part("last rows", FAIL, f"last_rows() returned {type(got).__name__}, not a max Tensor ({e})"))
    outs = [(m, last_rows(CHECKED_OFFSETS, rule).astype(np.float64)) for m, rule in ROW_MISTAKES]
    verdict = compare(got.astype(np.float64), want.astype(np.float64), axes=("request",), mistakes=outs, tol=EXACT)
    part = Part.from_verdict("last rows", verdict)
    part.summary = f"{part.summary}; got {got.tolist()}, expected {want.tolist()}" if not verdict.ok else \
        f"{want.tolist()} for offsets {CHECKED_OFFSETS.tolist()}"
    return run.add(part)


def run_eagerly(paged, modules, config, tokens: dict[str, list[int]]):
    """SCENARIO op by op, MAX's paged-cache kernels stood in for by checker.running.paged: as run_scenario,
    per batch every row's logits [rows, V] and the recorded pieces, and their names (Probed); None where
    the learner's code calls them outside what the stand-in covers (the model is then compiled)."""
    from max.experimental.executor import UnsupportedGraphError
    from max.experimental.tensor import Tensor

    cache = PagedCache(PAGED_LAYERS, config.n_head, config.n_embd // config.n_head)
    done, out, pieces, names = {name: 0 for name in tokens}, [], [], []
    try:
        with standing_in(modules):
            for batch in SCENARIO:
                ids = np.concatenate([tokens[name][done[name]:done[name] + n] for name, n in batch]).astype(np.int64)
                offsets = np.cumsum([0] + [n for _, n in batch]).astype(np.uint32)
                kv = cache.batch([name for name, _ in batch], [done[name] for name, _ in batch])
                recorded = []
                with recording(recorded, paged):
                    logits = paged(Tensor.from_dlpack(ids), kv, Tensor.from_dlpack(offsets))
                out.append(np.from_dlpack(logits).astype(np.float64))
                pieces.append([np.from_dlpack(value).astype(np.float64) for _, value in recorded])
                names = [name for name, _ in recorded]
                for name, n in batch:
                    done[name] += n
    except (NotStoodIn, UnsupportedGraphError):
        return None
    return out, pieces, names


EAGERLY = ("found op by op, before compiling: MAX's paged-cache kernels (store_k_cache_ragged, store_v_cache_ragged, "
           "flash_attention_ragged) stood in for by the check's own, with the arguments your code gave them; "
           "once this passes, your model is compiled as max serve compiles it")


def _model_part(run: StepRun, GPT2Paged, eleven, step, config, checkpoint: Checkpoint) -> Part:
    kv_params = paged_params(config, PAGED_LAYERS)
    tokens = scenario_tokens(min(config.vocab_size, 400))
    try:
        paged = learner_paged(run, GPT2Paged, eleven, config, checkpoint, kv_params)
    except LearnerError as e:
        return run.add(Part.from_error("paged model", e))
    limits = learner.limits_hit()
    try:  # op by op first: a wrong model is told without the compile (a minute after each change)
        eager = run.call(run_eagerly, paged, [step, *used_modules(step).values()], config, tokens)
    except LearnerError as e:  # the compile meets it too, and words it as MAX's graph does; a hang is a hang
        if learner.limits_hit() > limits:
            return run.add(Part.from_error("paged model", e))
        eager = None
    if eager is not None:
        part = _judged(*eager, checkpoint, tokens)
        if part.status != PASS:
            part.details.append(EAGERLY)
            return run.add(part)
    print(f"(compiling your GPT2Paged ({PAGED_LAYERS} blocks) as max serve compiles it: about a minute after a "
          "change on 2 cores, seconds when unchanged)", file=sys.stderr, flush=True)
    try:
        compiled, probed = run.call(compile_probed, paged, kv_params)
        got, recorded = run.call(run_scenario, compiled, kv_params, tokens)
    except LearnerError as e:
        return run.add(Part.from_error("paged model", e))
    return run.add(_judged(got, recorded, probed.names, checkpoint, tokens))


def _judged(got: list[np.ndarray], recorded: list[list[np.ndarray]], names: list[str], checkpoint: Checkpoint,
            tokens: dict[str, list[int]]) -> Part:
    """The paged-model part of per-batch logits `got` and recorded pieces (`names`), against Hugging Face."""
    hf = hf_model(checkpoint, PAGED_LAYERS)
    want = scenario_logits(hf, tokens)
    flat_got, flat_want = np.concatenate(got), np.concatenate(want)
    if flat_got.shape[0] == len(SCENARIO[0]) and flat_got.shape != flat_want.shape:
        return Part("paged model", FAIL, f"logits of shape {list(got[0].shape)} for the first batch, expected "
                    f"{list(want[0].shape)}: forward returns every new row's logits [T, V] (the server "
                    "takes each request's last row with last_rows, and every row for echo), not only "
                    "the last rows [B, V]")

    def mistakes():
        for m, variant in MISTAKES:
            model = hf if variant.scaled else hf_model(checkpoint, PAGED_LAYERS, scaled=False)
            yield m, np.concatenate(scenario_logits(model, tokens, variant))

    verdict = compare(flat_got, flat_want, axes=("row", "vocab"), mistakes=[], tol=PAGED_MODEL)
    if not verdict.ok and flat_got.shape == flat_want.shape:
        verdict = compare(flat_got, flat_want, axes=("row", "vocab"), mistakes=mistakes(), tol=PAGED_MODEL)
        if verdict.mistake is None:
            rows = [row for batch in scenario_rows(tokens) for row in batch]
            verdict.details += place(names, recorded, scenario_stream(hf, tokens), flat_got, flat_want, rows)
            verdict.details += rows_differ(got, want, scenario_rows(tokens))
    part = Part.from_verdict("paged model", verdict)
    part.summary = f"{len(SCENARIO)} batches, {flat_want.shape[0]} rows: {part.summary}"
    return part


