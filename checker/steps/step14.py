"""Step 14: the learner's served model, against Hugging Face, batch by batch and then by real requests.

Parts:

  earlier steps     the steps this file uses pass their own checks
  ragged positions  ragged_positions on a batch of prompts and decodes (offsets [0, 5, 6, 10, 11],
                    cached [0, 7, 0, 3]): each row's position, exactly
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

import contextlib
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from checker.reporting.compare import CORRECT_MARGIN, DECODE, EXACT, WHOLE_MODEL, Mistake, compare
from checker.harness.deps import used_modules
from checker.running.learner import LearnerError
from checker.reporting.report import FAIL, PASS, Part, Report
from checker.harness.runner import StepRun
from checker.references.weights import Checkpoint
from checker.registry import Step, register

FUNCTIONS = ("ragged_positions", "last_rows", "paged_attention", "GPT2Paged")
PARTS = ["earlier steps", "ragged positions", "last rows", "paged model", "served"]
PAGED_LAYERS = 2  # blocks compiled for the paged-model part: two tell layer 0's cache pages from layer 1's
PAGE_SIZE = 16

# The positions part's batch: 4 requests, new rows 5, 1, 4, 1, cached 0, 7, 0, 3.
OFFSETS = np.array([0, 5, 6, 10, 11], dtype=np.uint32)
CACHED = np.array([0, 7, 0, 3], dtype=np.uint32)

# The paged-model part's batches: (request, new tokens) in batch order.
SCENARIO = [
    [("A", 5), ("B", 3), ("C", 7)],  # three prompts
    [("C", 1), ("A", 1), ("D", 4)],  # two decodes, and a prompt arriving
    [("B", 1), ("D", 1), ("A", 1), ("C", 1)],  # B back after sitting a batch out
]
PROMPTS = ["Hello world, this is", "The model", "A longer prompt for the server, with more tokens in it"]
NEW_TOKENS = 8
CONCURRENT = 8
TOP_LOGPROBS = 3


# --- what ragged_positions and the model compute, and their mistakes --------------------------------


def positions(offsets: np.ndarray, cached: np.ndarray, rule: str = "right") -> np.ndarray:
    """Each row's position. rule: "right"; "not-offset" (the cache ignored: 0, 1, ... per request);
    "batch-rows" (the row's index in the whole batch, plus its request's cache)."""
    offsets, cached = offsets.astype(np.int64), cached.astype(np.int64)
    owner = np.repeat(np.arange(len(cached)), np.diff(offsets))
    rows = np.arange(offsets[-1])
    return {"right": rows - offsets[owner] + cached[owner], "not-offset": rows - offsets[owner],
            "batch-rows": rows + cached[owner]}[rule]


def last_rows(offsets: np.ndarray, rule: str = "right") -> np.ndarray:
    """Each request's last new row. rule: "right"; "first" (where each request starts); "past" (where the
    next request starts: the last request's is past the batch)."""
    offsets = offsets.astype(np.int64)
    return {"right": offsets[1:] - 1, "first": offsets[:-1], "past": offsets[1:]}[rule]


@dataclass(frozen=True)
class Variant:
    """How a mistaken model differs: its positions rule, the attention's scale, what it hands back."""

    positions: str = "right"
    scaled: bool = True
    output: str = "logits"  # or "probabilities"


MISTAKES = [
    (Mistake("positions-not-offset", "each request's positions start at 0 in every batch: its cached positions "
             "are not added, so decode steps embed position 0", "A decoding request's one new token sits after "
             "all it has cached: kv_collection.cache_lengths says how many."), Variant(positions="not-offset")),
    (Mistake("positions-batch-rows", "positions count rows of the whole batch, not of each request: a request's "
             "first row gets the rows before it", "Subtract where the row's own request starts "
             "(input_row_offsets)."), Variant(positions="batch-rows")),
    (Mistake("attention-unscaled", "the attention scores are not divided by sqrt(head_dim) (scale 1)",
             "flash_attention_ragged takes the scale: GPT-2's is 1 / sqrt(head_dim)."), Variant(scaled=False)),
    (Mistake("probabilities-not-logits", "the model hands back probabilities (softmax of the logits), not the "
             "logits: greedy text is the same, but every log-probability the server reports is wrong",
             "The server computes log_softmax itself, for echo and logprobs: return what the tied head gives."),
     Variant(output="probabilities")),
]
ROW_MISTAKES = [
    (Mistake("last-rows-first", "each request's first new row is taken, not its last: a prompt's next token "
             "comes from its first token", "input_row_offsets[b + 1] is where request b ends: its last row is "
             "the one before."), "first"),
    (Mistake("last-rows-past", "each request's row is where the next request starts, one past its last: the "
             "last request's is past the batch", "Request b owns rows input_row_offsets[b] .. "
             "input_row_offsets[b + 1] - 1."), "past"),
]
CATALOGUE = [m for m, _ in MISTAKES] + [m for m, _ in ROW_MISTAKES]


def _hf(checkpoint: Checkpoint, layers: int | None, scaled: bool = True):
    from transformers import GPT2LMHeadModel
    from transformers.utils import logging

    logging.set_verbosity_error()  # the blocks left out of a truncated model are expected

    extra = {"n_layer": layers} if layers else {}
    return GPT2LMHeadModel.from_pretrained(checkpoint.path, scale_attn_weights=scaled, **extra).eval()


def scenario_tokens(vocab: int) -> dict[str, list[int]]:
    """The tokens each request of SCENARIO feeds, in order: fixed, drawn below the tokenizer's size."""
    rng = np.random.default_rng(14)
    total: dict[str, int] = {}
    for batch in SCENARIO:
        for name, n in batch:
            total[name] = total.get(name, 0) + n
    return {name: rng.integers(0, vocab, size=n).tolist() for name, n in total.items()}


def scenario_rows(tokens: dict[str, list[int]]) -> list[list[tuple[str, bool]]]:
    """Per batch, each new row's (request, whether it is a prompt row)."""
    seen: set[str] = set()
    out = []
    for batch in SCENARIO:
        rows = []
        for name, n in batch:
            rows += [(name, name not in seen)] * n
            seen.add(name)
        out.append(rows)
    return out


def scenario_stream(model, tokens: dict[str, list[int]]) -> dict[str, np.ndarray]:
    """Hugging Face through SCENARIO, every row's stream where the learner's model is probed (Probed):
    {"h.i.ln_1": the input of block i, "h.i.ln_2": after its attention half, "h.i.mlp": its MLP's output,
    "ln_f": ln_f's input, "ln_f out": its output}, each [all rows of all batches, C] in batch order."""
    import torch

    seen: dict[str, list[np.ndarray]] = {}
    hooks = []
    for i, block in enumerate(model.transformer.h):
        for name, module in ((f"h.{i}.ln_1", block.ln_1), (f"h.{i}.ln_2", block.ln_2)):
            hooks.append(module.register_forward_pre_hook(
                lambda m, args, name=name: seen.setdefault(name, []).append(args[0][0].double().numpy())))
        hooks.append(block.mlp.register_forward_hook(
            lambda m, args, out, i=i: seen.setdefault(f"h.{i}.mlp", []).append(out[0].double().numpy())))
    def ln_f(module, args, out):  # a forward hook returns None: the output stays
        seen.setdefault("ln_f", []).append(args[0][0].double().numpy())
        seen.setdefault("ln_f out", []).append(out[0].double().numpy())

    hooks.append(model.transformer.ln_f.register_forward_hook(ln_f))
    try:
        with torch.no_grad():
            scenario_logits(model, tokens)
    finally:
        for hook in hooks:
            hook.remove()
    return {name: np.concatenate(rows) for name, rows in seen.items()}


def scenario_logits(model, tokens: dict[str, list[int]], variant: Variant = Variant()) -> list[np.ndarray]:
    """Hugging Face through SCENARIO as `variant` computes it: per batch, every new row's [rows, V] logits.

    Each request keeps its own Hugging Face cache, so keys and values are those computed at the
    variant's positions, as a learner's cache would hold them."""
    import torch

    caches: dict[str, object] = {}
    done = {name: 0 for name in tokens}
    out = []
    for batch in SCENARIO:
        offsets = np.cumsum([0] + [n for _, n in batch])
        cached = np.array([done[name] for name, _ in batch])
        pos = positions(offsets, cached, variant.positions)
        rows = []
        for b, (name, n) in enumerate(batch):
            ids = torch.tensor([tokens[name][done[name]:done[name] + n]])
            with torch.no_grad():
                result = model(ids, past_key_values=caches.get(name), position_ids=torch.from_numpy(
                    pos[None, offsets[b]:offsets[b + 1]]), use_cache=True)
            caches[name] = result.past_key_values
            logits = result.logits[0].double()
            rows.append((torch.softmax(logits, -1) if variant.output == "probabilities" else logits).numpy())
            done[name] += n
        out.append(np.concatenate(rows))
    return out


# --- the learner's model on MAX's paged cache ----------------------------------------------------


def paged_params(config, layers: int):
    from max.dtype import DType
    from max.graph import DeviceRef
    from max.nn.kv_cache import MHAKVCacheParams

    return MHAKVCacheParams(dtype=DType.float32, n_kv_heads=config.n_head, head_dim=config.n_embd // config.n_head,
                            num_layers=layers, page_size=PAGE_SIZE, devices=[DeviceRef.CPU()])


PROBED = ("ln_1", "ln_2", "mlp")  # each block's modules the probe records; and the body's ln_f


class Probed:
    """The learner's GPT2Paged in the check's compiled graph, returning beside every row's logits what its
    model's LayerNorms and MLPs were given or gave as its forward ran (the stream at each half of each
    block), so that a model that is off can be placed piece by piece without a second compile.

    `names` lists the recorded tensors, in order, once the graph is traced: "h.i.ln_1" (block i's input),
    "h.i.ln_2" (after its attention half), "h.i.mlp" (its MLP's output), "ln_f" (the stream at the end),
    "ln_f out"; a piece the learner's forward does not call through its module is simply not there."""

    def __init__(self, paged, kv_params):
        from max.experimental.nn import Module

        self.names: list[str] = []
        probe = self

        class _Graph(Module):
            def __init__(self):
                self.paged = paged

            def forward(self, tokens, return_n_logits, input_row_offsets, *kv_inputs):
                from max import tree
                from max.nn.kv_cache import KVCacheInputsPerDevice

                del return_n_logits
                flat = iter(x._graph_value for x in kv_inputs)
                (kv,) = tree.leaves(kv_params.unflatten_kv_inputs(flat), leaf=KVCacheInputsPerDevice)
                recorded = []
                with probe._recording(recorded, self.paged):  # the copy Module.compile traces, not `paged`
                    logits = self.paged(tokens, kv, input_row_offsets)
                probe.names = [name for name, _ in recorded]
                return (logits, *(value for _, value in recorded))

        self.graph = _Graph()

    @staticmethod
    @contextlib.contextmanager
    def _recording(recorded: list, paged):
        t = getattr(paged, "transformer", None)
        watched = [(f"h.{i}.{name}", getattr(block, name)) for i, block in enumerate(getattr(t, "h", []) or [])
                   for name in PROBED if hasattr(block, name)]
        if t is not None and hasattr(t, "ln_f"):
            watched.append(("ln_f", t.ln_f))
        for name, module in watched:
            forward = module.forward

            def record(x, *args, name=name, forward=forward, **kwargs):
                y = forward(x, *args, **kwargs)
                if name.endswith(".mlp"):
                    recorded.append((name, y))
                else:
                    recorded.append((name, x))
                    if name == "ln_f":
                        recorded.append(("ln_f out", y))
                return y

            object.__setattr__(module, "forward", record)
        try:
            yield
        finally:
            for _, module in watched:
                if "forward" in vars(module):
                    object.__delattr__(module, "forward")


def compile_probed(paged_model, kv_params) -> tuple[object, Probed]:
    """The learner's GPT2Paged compiled with MAX's ragged inputs, its pieces recorded (Probed)."""
    from max.graph import DeviceRef
    from max.pipelines.lib.interfaces.batch_processor import modulev3_ragged_kv_symbolic_inputs

    probed = Probed(paged_model, kv_params)
    types = modulev3_ragged_kv_symbolic_inputs(kv_params=kv_params, device_refs=[DeviceRef.CPU()])
    return probed.graph.compile(*types), probed


def run_scenario(compiled, kv_params, tokens: dict[str, list[int]]) -> tuple[list[np.ndarray], list[list[np.ndarray]]]:
    """The compiled probe (compile_probed) through SCENARIO on a real PagedKVCacheManager: per batch, every
    row's logits [rows, V], and per batch the recorded tensors [rows, C]."""
    from max import tree
    from max.driver import CPU, Buffer
    from max.engine import InferenceSession
    from max.pipelines.context import TextContext, TokenBuffer
    from max.pipelines.kv_cache import PagedKVCacheManager
    from max.pipelines.modeling.types import RequestID

    manager = PagedKVCacheManager(params=kv_params, session=InferenceSession(devices=[CPU()]),
                                  total_num_pages=32, max_batch_size=8)
    contexts, done, out, recorded = {}, {name: 0 for name in tokens}, [], []
    for batch in SCENARIO:
        for name, n in batch:
            if name not in contexts:
                contexts[name] = TextContext(request_id=RequestID(), max_length=1024,
                                             tokens=TokenBuffer(np.array(tokens[name][:n], dtype=np.int64)))
                manager.claim(contexts[name])
            else:  # the request's next token, as the server appends the one it chose
                contexts[name].update(tokens[name][done[name]])
                manager.step(contexts[name])
            done[name] += n
        ctxs = [contexts[name] for name, _ in batch]
        for c in ctxs:
            manager.alloc(c)
        ids = np.concatenate([c.tokens.active for c in ctxs]).astype(np.int64)
        offsets = np.cumsum([0] + [len(c.tokens.active) for c in ctxs]).astype(np.uint32)
        logits, *pieces = compiled(Buffer.from_numpy(ids), Buffer.from_numpy(np.array([1], np.int64)),
                                   Buffer.from_numpy(offsets), *tree.leaves(manager.runtime_inputs([ctxs])))
        out.append(np.from_dlpack(logits).astype(np.float64))
        recorded.append([np.from_dlpack(p).astype(np.float64) for p in pieces])
    return out, recorded


def _row_margins(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """[rows, V] -> [rows]: each row's worst |got - want| / what the whole-model tolerance allows."""
    return np.max(np.abs(got - want) / WHOLE_MODEL.allowed(want), axis=-1)


def _where(got: list[np.ndarray], want: list[np.ndarray], rows: list[list[tuple[str, bool]]]) -> list[str]:
    """Which requests are right in which batch, in words: prompt rows and decode rows apart.

    A request counts as right only within a tenth of the tolerance (where correct code stays, the
    margin rule): one within the tolerance but nearer its edge is off like the others, just less."""
    right, off = {"prompt": [], "decode": []}, {"prompt": [], "decode": []}
    near = []
    flat_want = np.concatenate(want)  # [rows, V]: allowed as the part's verdict allows it
    margins = iter(_row_margins(np.concatenate(got), flat_want))
    for i, batch in enumerate(rows):
        worst: dict[str, float] = {}
        for name, _ in batch:
            worst[name] = max(worst.get(name, 0.0), float(next(margins)))
        for name, margin in worst.items():
            kind = "prompt" if dict(batch)[name] else "decode"
            label = f"{name} (batch {i + 1})"
            (right if margin <= CORRECT_MARGIN else off)[kind].append(label)
            if CORRECT_MARGIN < margin <= 1:
                near.append(f"{label} at {margin:.2f}")
    lines = []
    for kind, what in (("prompt", "prompts (no cached positions)"), ("decode", "decode steps (after cached positions)")):
        if right[kind] or off[kind]:
            lines.append(f"{what}: right for {', '.join(right[kind]) or 'none'}; off for "
                         f"{', '.join(off[kind]) or 'none'}")
    if near:
        lines.append(f"within the tolerance but off (correct code stays under {CORRECT_MARGIN} of it): {', '.join(near)}")
    if not off["prompt"] and off["decode"]:
        lines.append("every prompt is right and decode steps are not: what a request reads back from its "
                     "cache (the keys and values each layer stores, under its own layer_idx), or the positions "
                     "of tokens after it")
    elif off["prompt"] and right["prompt"]:
        lines.append("some prompts are right and others not: look at what differs per request in the batch "
                     "(its rows, its positions)")
    return lines


def _rows_off(got: np.ndarray, want: np.ndarray, rows: list[tuple[str, bool]]) -> tuple[bool, str]:
    """(whether any row is off, which: "every row", or the requests' prompt / decode rows that are)."""
    off = _row_margins(got, want) > 1
    if not off.any():
        return False, ""
    if off.all():
        return True, "every row"
    kinds = {("prompt" if is_prompt else "decode", name) for (name, is_prompt), bad in zip(rows, off) if bad}
    prompts = sorted(n for k, n in kinds if k == "prompt")
    decodes = sorted(n for k, n in kinds if k == "decode")
    said = [f"{', '.join(prompts)}'s prompt rows" if prompts else "", f"{', '.join(decodes)}'s decode rows" if decodes else ""]
    return True, " and ".join(s for s in said if s) + (" (prompts right: what a decode step reads back from the cache)"
                                                        if decodes and not prompts else "")


def _piece(name: str) -> str:
    """"h.0.ln_2" -> "block 0's ln_2"."""
    block, _, module = name.rpartition(".")
    return f"block {block.removeprefix('h.')}'s {module}" if block else name


def place(names: list[str], recorded: list[list[np.ndarray]], stream: dict[str, np.ndarray], got_logits: np.ndarray,
          want_logits: np.ndarray, rows: list[tuple[str, bool]]) -> list[str]:
    """The first piece of the learner's paged model that differs from Hugging Face on the scenario's rows,
    from what the probe recorded (Probed): the embeddings, each block's attention half and MLP half, ln_f,
    the head. One line; it names paged_attention only when an attention half is the first to differ."""
    got = {}
    for i, name in enumerate(names):
        got.setdefault(name, np.concatenate([batch[i] for batch in recorded]))
    n = PAGED_LAYERS
    expected = [f"h.{i}.{p}" for i in range(n) for p in PROBED] + ["ln_f", "ln_f out"]
    if not got:
        return ["where: the probes could not place it (your forward calls none of the blocks' ln_1, ln_2 and mlp "
                "nor ln_f as modules, so the stream between them is not seen)"]
    if missing := [name for name in expected if name not in got and name != "ln_f out"]:
        said = " and ".join(_piece(name) for name in missing[:3]) + (" (and more)" if len(missing) > 3 else "")
        return [f"where: forward never calls {said}: each block is x + attention(ln_1(x)), then x + mlp(ln_2(x)); "
                "ln_f once at the end"]
    order = list(dict.fromkeys(names))
    if order != expected:
        return [f"where: forward calls the blocks' modules in the order {', '.join(order)} (expected h.0's ln_1, "
                f"ln_2, mlp, then h.1's, ..., ln_f once at the end)"]
    steps = [("h.0.ln_1", "the embeddings: the stream into block 0 is not wte(tokens) + wpe's row at each row's "
              "position (ragged_positions passes, above: look at how forward uses it)")]
    for i in range(n):
        after = f"h.{i + 1}.ln_1" if i + 1 < n else "ln_f"
        steps += [(f"h.{i}.ln_2", f"block {i}'s attention half: its input matches, the stream after x + "
                   f"paged_attention(...) does not: paged_attention (the keys and values it stores under layer_idx "
                   f"{i} and reads back, the mask, the scale) or how forward adds it to the stream"),
                  (f"h.{i}.mlp", f"block {i}'s MLP: the stream after the attention half matches, block.mlp(...) "
                   "does not: what forward hands it (ln_2 of the stream)"),
                  (after, f"block {i}'s MLP half: the MLP's output matches, the stream after it does not: the "
                   "residual add x + mlp(ln_2(x))")]
    steps.append(("ln_f out", "ln_f: the stream at the end matches, ln_f's output does not"))
    for name, said in steps:
        off, which = _rows_off(got[name], stream[name], rows)
        if off:
            return [f"where: everything before matches Hugging Face; {said}; off on {which}"]
    off, which = _rows_off(got_logits, want_logits, rows)
    return [f"where: the whole stream and ln_f's output match Hugging Face; the head does not: every row's logits "
            f"are ln_f's output @ wte.weight.T (tied); off on {which}"] if off else []


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
                  f"float32, logits {WHOLE_MODEL}" if serve else f"ragged batches of 3-4 requests (prompts and "
                  f"decodes mixed); float32, logits {WHOLE_MODEL}; no server (GPT2_CHECK_SERVE=0)", parts,
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
        run.add(_served_part(path, checkpoint))
    return run.finish("runs once the parts above pass")


def _positions_part(run: StepRun, ragged_positions) -> Part:
    from max.experimental.tensor import Tensor

    want = positions(OFFSETS, CACHED)
    try:
        got = run.call(ragged_positions, int(OFFSETS[-1]), Tensor.from_dlpack(OFFSETS), Tensor.from_dlpack(CACHED))
        if got is None:
            raise LearnerError("ragged_positions() returned None: is a `return` missing?")
        got = np.from_dlpack(got)
    except LearnerError as e:
        return run.add(Part.from_error("ragged positions", e))
    except Exception as e:  # noqa: BLE001 - not a Tensor
        return run.add(Part("ragged positions", FAIL, f"ragged_positions() returned {type(got).__name__}, "
                            f"not a max Tensor ({e})"))
    outs = [(m, positions(OFFSETS, CACHED, v.positions).astype(np.float64)) for m, v in MISTAKES
            if v.positions != "right"]
    verdict = compare(got.astype(np.float64), want.astype(np.float64), axes=("row",), mistakes=outs, tol=EXACT)
    part = Part.from_verdict("ragged positions", verdict)
    part.summary = f"{part.summary}; got {got.tolist()}, expected {want.tolist()}" if not verdict.ok else \
        f"{want.tolist()} for offsets {OFFSETS.tolist()}, cached {CACHED.tolist()}"
    return run.add(part)


def _last_rows_part(run: StepRun, last_rows_fn) -> Part:
    from max.experimental.tensor import Tensor

    want = last_rows(OFFSETS)
    try:
        got = run.call(last_rows_fn, Tensor.from_dlpack(OFFSETS))
        if got is None:
            raise LearnerError("last_rows() returned None: is a `return` missing?")
        got = np.from_dlpack(got)
    except LearnerError as e:
        return run.add(Part.from_error("last rows", e))
    except Exception as e:  # noqa: BLE001 - not a Tensor
        return run.add(Part("last rows", FAIL, f"last_rows() returned {type(got).__name__}, not a max Tensor ({e})"))
    outs = [(m, last_rows(OFFSETS, rule).astype(np.float64)) for m, rule in ROW_MISTAKES]
    verdict = compare(got.astype(np.float64), want.astype(np.float64), axes=("request",), mistakes=outs, tol=EXACT)
    part = Part.from_verdict("last rows", verdict)
    part.summary = f"{part.summary}; got {got.tolist()}, expected {want.tolist()}" if not verdict.ok else \
        f"{want.tolist()} for offsets {OFFSETS.tolist()}"
    return run.add(part)


def _learner_paged(run: StepRun, GPT2Paged, eleven, config, checkpoint: Checkpoint, kv_params):
    """The learner's GPT2Paged around their step 11 model, built with PAGED_LAYERS blocks and loaded by
    their load_hf_weights with those blocks' tensors."""
    from types import SimpleNamespace

    from max.experimental import functional as F

    from checker.running.loading import stored_tensors

    small = SimpleNamespace(**{**vars(config), "n_layer": PAGED_LAYERS})
    tensors = {n: v for n, v in stored_tensors(checkpoint).items()
               if ".h." not in n or int(n.split(".h.")[1].split(".")[0]) < PAGED_LAYERS}
    with F.lazy():
        model = run.call(eleven.GPT2LMHeadModel, small)
    run.call(eleven.load_hf_weights, model, tensors)
    return run.call(GPT2Paged, model, kv_params)


def run_eagerly(paged, modules, config, tokens: dict[str, list[int]]):
    """SCENARIO op by op, MAX's paged-cache kernels stood in for by checker.running.paged: as run_scenario,
    per batch every row's logits [rows, V] and the recorded pieces, and their names (Probed); None where
    the learner's code calls them outside what the stand-in covers (the model is then compiled)."""
    from max.experimental.executor import UnsupportedGraphError
    from max.experimental.tensor import Tensor

    from checker.running.paged import NotStoodIn, PagedCache, standing_in

    cache = PagedCache(PAGED_LAYERS, config.n_head, config.n_embd // config.n_head)
    done, out, pieces, names = {name: 0 for name in tokens}, [], [], []
    try:
        with standing_in(modules):
            for batch in SCENARIO:
                ids = np.concatenate([tokens[name][done[name]:done[name] + n] for name, n in batch]).astype(np.int64)
                offsets = np.cumsum([0] + [n for _, n in batch]).astype(np.uint32)
                kv = cache.batch([name for name, _ in batch], [done[name] for name, _ in batch])
                recorded = []
                with Probed._recording(recorded, paged):
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
    from checker.running import learner

    kv_params = paged_params(config, PAGED_LAYERS)
    tokens = scenario_tokens(min(config.vocab_size, 400))
    try:
        paged = _learner_paged(run, GPT2Paged, eleven, config, checkpoint, kv_params)
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
    hf = _hf(checkpoint, PAGED_LAYERS)
    want = scenario_logits(hf, tokens)
    flat_got, flat_want = np.concatenate(got), np.concatenate(want)
    if flat_got.shape[0] == len(SCENARIO[0]) and flat_got.shape != flat_want.shape:
        return Part("paged model", FAIL, f"logits of shape {list(got[0].shape)} for the first batch, expected "
                    f"{list(want[0].shape)}: forward returns every new row's logits [T, V] (the server "
                    "takes each request's last row with last_rows, and every row for echo), not only "
                    "the last rows [B, V]")

    def mistakes():
        for m, variant in MISTAKES:
            model = hf if variant.scaled else _hf(checkpoint, PAGED_LAYERS, scaled=False)
            yield m, np.concatenate(scenario_logits(model, tokens, variant))

    verdict = compare(flat_got, flat_want, axes=("row", "vocab"), mistakes=[], tol=WHOLE_MODEL)
    if not verdict.ok and flat_got.shape == flat_want.shape:
        verdict = compare(flat_got, flat_want, axes=("row", "vocab"), mistakes=mistakes(), tol=WHOLE_MODEL)
        if verdict.mistake is None:
            rows = [row for batch in scenario_rows(tokens) for row in batch]
            verdict.details += place(names, recorded, scenario_stream(hf, tokens), flat_got, flat_want, rows)
            verdict.details += _where(got, want, scenario_rows(tokens))
    part = Part.from_verdict("paged model", verdict)
    part.summary = f"{len(SCENARIO)} batches, {flat_want.shape[0]} rows: {part.summary}"
    return part


# --- the served part ------------------------------------------------------------------------------


def greedy_reference(checkpoint: Checkpoint, prompts: list[str], new_tokens: int):
    """transformers' greedy ids, the argmax taken over the tokenizer's ids (max serve's sampler masks
    the logits past the tokenizer's size: the stand-ins' tokenizers are smaller than the model), up to
    `new_tokens` or an end-of-text token, where max serve stops; with each chosen id's log-probability
    (log_softmax over the whole vocabulary, as max serve reports it)."""
    import torch
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checkpoint.path)
    model = _hf(checkpoint, None)
    stops = {tokenizer.eos_token_id, checkpoint.config().get("eos_token_id")}  # max serve stops at either
    out, logprobs = [], []
    for prompt in prompts:
        ids = torch.tensor([tokenizer(prompt)["input_ids"]])
        new, lps = [], []
        with torch.no_grad():
            while len(new) < new_tokens and not (new and new[-1] in stops):
                logits = model(ids).logits[0, -1].double()
                token = int(logits[:len(tokenizer)].argmax())
                new.append(token)
                lps.append(float(torch.log_softmax(logits, -1)[token]))
                ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
        out.append(new)
        logprobs.append(lps)
    return out, logprobs


def prompt_logprobs(checkpoint: Checkpoint, prompts: list[str]) -> list[np.ndarray]:
    """Each prompt token's log-probability given the tokens before it (transformers' log_softmax), from
    the second token on: what `echo` with `logprobs` reports after its null for the first."""
    import torch
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checkpoint.path)
    model = _hf(checkpoint, None)
    out = []
    for prompt in prompts:
        ids = tokenizer(prompt)["input_ids"]
        with torch.no_grad():
            lp = torch.log_softmax(model(torch.tensor([ids])).logits[0].double(), -1).numpy()
        out.append(np.array([lp[i - 1, ids[i]] for i in range(1, len(ids))]))
    return out


def _close_logprobs(got: list, want: list[np.ndarray]) -> tuple[bool, str]:
    """Log-probabilities against transformers' under DECODE (the model ran over a cache, one kernel per
    position): (ok, what to say)."""
    if [len(g) for g in got] != [len(w) for w in want] or any(x is None for g in got for x in g):
        return False, f"{[len(g) for g in got]} values per request, expected {[len(w) for w in want]}"
    verdict = compare(np.concatenate([np.array(g, dtype=np.float64) for g in got]), np.concatenate(want),
                      axes=("token",), mistakes=[], tol=DECODE)
    return verdict.ok, verdict.summary


def same_text(served: str, expected: str) -> bool:
    """The served text is the expected ids decoded. max serve holds back the bytes of a last token that
    end inside a UTF-8 character, which tokenizer.decode shows as U+FFFD: those may be missing."""
    return served == expected or served == expected.rstrip("\ufffd")


def serving_checks(server, checkpoint: Checkpoint) -> list[tuple[str, bool, str]]:
    """Real requests against a running server: (what, ok, what came back) for each check."""
    from openai import APIStatusError
    from transformers import AutoTokenizer

    from checker.running.server import MODEL

    tokenizer = AutoTokenizer.from_pretrained(checkpoint.path)
    client, model = server.client(), MODEL
    expected, expected_lps = greedy_reference(checkpoint, PROMPTS, NEW_TOKENS)
    texts = [tokenizer.decode(ids, skip_special_tokens=True) for ids in expected]  # as max serve shows them

    def complete(prompt: str, n: int = NEW_TOKENS) -> str:
        return client.completions.create(model=model, prompt=prompt, max_tokens=n, temperature=0).choices[0].text

    results = []
    got = [complete(p) for p in PROMPTS]
    results.append((f"greedy completions of {len(PROMPTS)} prompts equal transformers' greedy ids",
                    all(map(same_text, got, texts)),
                    "; ".join(f"{g!r} (expected {t!r})" for g, t in zip(got, texts) if not same_text(g, t))))
    stream = client.completions.create(model=model, prompt=PROMPTS[0], max_tokens=NEW_TOKENS, temperature=0,
                                       stream=True)
    pieces = "".join(chunk.choices[0].text for chunk in stream if chunk.choices)
    results.append(("streaming returns the same tokens in order", same_text(pieces, texts[0]),
                    f"{pieces!r}, expected {texts[0]!r}"))
    many = [PROMPTS[i % len(PROMPTS)] + " " * (i // len(PROMPTS)) for i in range(CONCURRENT)]
    lengths = [NEW_TOKENS - i % 3 for i in range(CONCURRENT)]
    alone = [complete(p, n) for p, n in zip(many, lengths)]
    with ThreadPoolExecutor(CONCURRENT) as pool:
        together = list(pool.map(complete, many, lengths))
    crossed = [i for i, (a, b) in enumerate(zip(alone, together)) if a != b]
    results.append((f"{CONCURRENT} concurrent requests of different lengths each get its single-request answer",
                    not crossed, f"requests {crossed} differ: {[together[i] for i in crossed]} against "
                                 f"{[alone[i] for i in crossed]}"))
    scored = [client.completions.create(model=model, prompt=p, max_tokens=0, echo=True, logprobs=1, temperature=0)
              .choices[0] for p in PROMPTS]
    ok, said = _close_logprobs([c.logprobs.token_logprobs[1:] for c in scored], prompt_logprobs(checkpoint, PROMPTS))
    ok = ok and all(c.text == p and c.logprobs.token_logprobs[0] is None for c, p in zip(scored, PROMPTS))
    results.append(("the log-probability of every prompt token (echo, max_tokens 0, logprobs 1: how evaluation "
                    "harnesses score text) equals transformers' log_softmax", ok, said))
    generated = [client.completions.create(model=model, prompt=p, max_tokens=NEW_TOKENS, logprobs=TOP_LOGPROBS,
                                           temperature=0).choices[0].logprobs for p in PROMPTS]
    ok, said = _close_logprobs([g.token_logprobs for g in generated], [np.array(w) for w in expected_lps])
    ok = ok and all(0 < len(top) <= TOP_LOGPROBS + 1 for g in generated for top in g.top_logprobs)
    results.append((f"each generated token's log-probability (logprobs {TOP_LOGPROBS}) equals transformers' "
                    "log_softmax", ok, said))
    for what, kwargs in (("a request past n_positions", {"prompt": "word " * 1100, "max_tokens": 4}),
                         ("invalid parameters (temperature -1)", {"prompt": PROMPTS[0], "max_tokens": 4,
                                                                 "temperature": -1})):
        try:
            client.completions.create(model=model, **kwargs)
            results.append((f"{what} gets a 4xx", False, "it was answered"))
        except APIStatusError as e:  # 4xx and 5xx alike: the code is checked below
            code = getattr(e, "status_code", 0)
            message = _message(e)
            results.append((f"{what} gets a 4xx with a message", 400 <= code < 500 and bool(message),
                            f"{code}: {message}"))
    after = complete(PROMPTS[1])
    results.append(("the server goes on serving after them (the same answer as before them)", after == got[1],
                    f"{after!r}, before them {got[1]!r}"))
    return results


def _message(e) -> str:
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        return str(body.get("message") or body.get("detail") or json.dumps(body))[:200]
    return str(e)[:200]


def _served_part(path: Path, checkpoint: Checkpoint) -> Part:
    from checker.running.server import Server, ServerError

    try:
        with Server(path, checkpoint.path) as server:
            results = serving_checks(server, checkpoint)
            started = server.started_in
    except ServerError as e:
        return Part("served", FAIL, "max serve of your model did not start", str(e).splitlines()[-12:])
    except Exception as e:  # noqa: BLE001 - a request that failed outright
        return Part("served", FAIL, f"a request to max serve failed: {type(e).__name__}: {str(e)[:300]}")
    failed = [f"{what}: {said}" for what, ok, said in results if not ok]
    summary = f"{len(results) - len(failed)} of {len(results)} serving checks pass (server ready in {started:.0f} s)"
    details = [f"{'ok  ' if ok else 'FAIL'} {what}" for what, ok, _ in results] + failed
    if not results[0][1]:  # the paged part passed: what the server runs besides is every block, loaded
        details.append(f"the paged part above passed with {PAGED_LAYERS} blocks, and the server runs all "
                       f"{checkpoint.config()['n_layer']}: look at what changes with the block (its layer_idx, an "
                       "index or a loop over blocks) and at how every block's weights are loaded")
    return Part("served", FAIL if failed else PASS, summary, details)


register(Step("14", check, CATALOGUE))
