"""Step 16: the learner's 8-bit weights and int8 Mojo kernel, against numpy and Hugging Face.

Parts:

  earlier steps  the steps this file uses pass their own checks
  quantize       quantize(w) on quantize_cases (rows of random floats with K no multiple of BLOCK, a
                 row of zeros, and the checkpoint's own weights of each product): q exactly as
                 checker.references.quantize (a tie that float rounding may tip either way allowed
                 +-1), scales to float32 rounding
  dequantize     dequantize(q, scales) of the reference's q and scales, to float32 rounding
  quality        what quantisation costs, from the learner's quantize and dequantize: transformers
                 float32 against transformers on their dequantised weights over the course's text;
                 mean KL divergence and top-1 agreement of the next-token distributions, perplexity;
                 KL at most QUALITY_BOUND times the reference quantiser's
  kernel         once the parts above pass: matvec_q8 (their Mojo, in a child process) on step 15's
                 shapes, w quantised by the reference: against numpy's x @ dequantize(q, scales).T + b
  decode         GPT2Quantized, two steps op by op and then compiled for one position (step 15's
                 decode_part), the learner's model loaded with the dequantised weights (the prompt through their step 13 graph on the same numbers):
                 each decode step's logits against transformers loaded with the dequantised weights,
                 greedy ids equal, the kernel called for every product (4 per block and the head)
  timing         a report, not a verdict: decode tokens/s with the int8 kernel and with MAX's float32
                 products (step 13's graph) in the same run, bytes read per token, the bandwidth share

A mistake is named only when the learner's outputs equal what it computes on every case (MISTAKES,
KERNEL_MISTAKES).
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import numpy as np

from checker.harness.deps import used_modules
from checker.harness.runner import StepRun
from checker.references import quantize as ref
from checker.references.weights import STANDINS, Checkpoint
from checker.registry import Step, register
from checker.reporting.compare import DECODE, Mistake, Tolerance, compare
from checker.reporting.report import FAIL, PASS, TODO, Part, Report
from checker.running.learner import LearnerError
from checker.running.mojo import SEED, case_arrays, kernel_args
from checker.steps import step15

FUNCTIONS = ("quantize", "dequantize", "matvec_q8", "QuantizedLinear", "GPT2Quantized")
PARTS = ["earlier steps", "quantize", "dequantize", "quality", "kernel", "decode", "timing"]
BLOCK = ref.BLOCK
SCALES = Tolerance(0.0, 3e-7)  # float32 rounding of max|w| / 127, however it is computed
# A right quantiser's KL is the reference's (the same q); on the stand-ins one scale per row is 1.7-1.9x it,
# rounding toward zero 1.8-2.5x, one scale per tensor 5-12x, max|w| / 128 1.3-1.5x (tests/test_step16.py).
QUALITY_BOUND = 1.2
TEXT_TOKENS = 128


# --- quantize and dequantize -------------------------------------------------------------------------


def quantize_cases(checkpoint: Checkpoint) -> dict[str, np.ndarray]:
    """name -> w [M, K] float32: small rows whose K is no multiple of BLOCK (one row all zeros), then block
    0's weights of each product and the head's first rows, as the Linear [out, in] they are."""
    from checker.running.loading import stored_tensors

    rng = np.random.default_rng(16)
    cases = {f"w [{m}, {k}]": rng.standard_normal((m, k), dtype=np.float32) for m, k in ((3, 32), (4, 45), (2, 100), (5, 7))}
    cases["w [4, 45]"][1] = 0.0  # a row of zeros: scales 0, q 0
    stored = stored_tensors(checkpoint)
    for name, value in stored.items():
        if ".h.0." in name and ref.is_product(name):
            cases[name.split(".h.0.")[1].removesuffix(".weight")] = np.ascontiguousarray(value.T)
    head = next(value for name, value in stored.items() if name.endswith(ref.HEAD))
    cases["head (wte), first 512 rows"] = head[:512]
    return cases


def _per_tensor(w):
    scale = np.float32(np.abs(w).max() / 127)
    q = np.rint(w / scale).astype(np.int8)
    return q, np.full((w.shape[0], -(-w.shape[1] // BLOCK)), scale, np.float32)


def _per_row(w):
    scale = (np.abs(w).max(axis=1, keepdims=True) / np.float32(127)).astype(np.float32)
    q = np.rint(w / np.where(scale == 0, 1, scale)).astype(np.int8)
    return q, np.repeat(scale, -(-w.shape[1] // BLOCK), axis=1)


def _rounded_by(rule):
    def quantize(w):
        _, scales = ref.quantize(w)
        per_column = np.repeat(scales, BLOCK, axis=1)[:, :w.shape[1]]
        return np.clip(rule(w / np.where(per_column == 0, 1, per_column)), -127, 127).astype(np.int8), scales
    return quantize


def _divided_by(d):
    def quantize(w):
        q, scales = ref.quantize(w)
        scales = (scales * np.float32(127) / np.float32(d)).astype(np.float32)
        per_column = np.repeat(scales, BLOCK, axis=1)[:, :w.shape[1]]
        return np.clip(np.rint(w / np.where(per_column == 0, 1, per_column)), -127, 127).astype(np.int8), scales
    return quantize


def _whole_blocks_only(w):
    q, scales = ref.quantize(w)
    whole = w.shape[1] // BLOCK
    q[:, whole * BLOCK:] = 0
    return q, scales[:, :whole]


SCALE_HINT = ("One scale per BLOCK columns of a row: reshape (or slice) w [M, K] into its row's blocks along K, "
              "take each block's max |w|, and divide by 127.")
MISTAKES = [
    (Mistake("one-scale-per-tensor", "one scale for the whole weight (max |w| of all of it), not one per block: "
             "every block that holds no outlier loses precision", SCALE_HINT), _per_tensor),
    (Mistake("one-scale-per-row", "one scale per row (the row's max |w|), not one per block of 32 of its columns",
             SCALE_HINT), _per_row),
    (Mistake("truncated", "w / scale is cut toward zero (astype(int8) without rounding), not rounded to the "
             "nearest: every weight loses up to a whole step, half a step on average",
             "Round before the cast: np.rint rounds to the nearest (ties to even)."), _rounded_by(np.trunc)),
    (Mistake("floored", "w / scale is rounded down (floor), not to the nearest", "np.rint rounds to the nearest."),
     _rounded_by(np.floor)),
    (Mistake("scale-over-128", "the scale is max |w| / 128: q reaches only +-127 * 128 / 127 of the range, and "
             "the block's largest weight comes back off", "The largest |w| of a block maps to 127 exactly: scale = "
             "max |w| / 127."), _divided_by(128)),
    (Mistake("scale-over-255", "the scale is max |w| / 255, as for unsigned 8 bits: q would need -255..255 and "
             "is clipped at int8's range", "Symmetric int8 uses -127..127: scale = max |w| / 127."),
     _divided_by(255)),
    (Mistake("last-block-dropped", "the last K % 32 columns of each row get no block (K // 32 blocks, not "
             "ceil(K / 32)): GPT-2's products have K a multiple of 32, the check's small rows do not",
             "The last block of a row is K % 32 columns wide when K is no multiple of 32: it has its own scale."),
     _whole_blocks_only),
]
DEQUANTIZE_MISTAKES = [
    (Mistake("scales-tiled", "column k is scaled by scales[:, k % KB] (the scales tiled along the row), not by "
             "its own block's scales[:, k // 32]", "Each scale covers 32 neighbouring columns: np.repeat(scales, "
             "32, axis=1), cut to K, not np.tile."),
     lambda q, s: q.astype(np.float32) * np.tile(s, -(-q.shape[1] // s.shape[1]))[:, :q.shape[1]]),
    (Mistake("dequantize-unscaled", "q is returned as floats, never multiplied by its scale",
             "w ~= q * scale: each column times its block's scale."), lambda q, s: q.astype(np.float32)),
]


def _near_tie(w: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Where w / scale is within float rounding of a half: its rounding may tip either way."""
    per_column = np.repeat(scales, BLOCK, axis=1)[:, :w.shape[1]].astype(np.float64)
    ratio = w.astype(np.float64) / np.where(per_column == 0, 1, per_column)
    return np.abs(np.abs(ratio - np.trunc(ratio)) - 0.5) < 1e-4


def _arrays(got, what: str) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(got, tuple) or len(got) != 2:
        raise LearnerError(f"{what} returned {type(got).__name__}, expected a tuple (q, scales)")
    return np.asarray(got[0]), np.asarray(got[1])


def _quantize_part(run: StepRun, quantize, cases: dict[str, np.ndarray]) -> Part:
    try:
        got = {name: _arrays(run.call(quantize, w.copy()), "quantize(w)") for name, w in cases.items()}
    except LearnerError as e:
        return run.add(Part.from_error("quantize", e))
    want = {name: ref.quantize(w) for name, w in cases.items()}
    for name, (q, scales) in got.items():
        if q.dtype != np.int8:
            return run.add(Part("quantize", FAIL, f"q is {q.dtype} on {name}, int8 expected: the kernel reads one "
                                "byte a weight"))
        if q.shape == want[name][0].shape:  # a tie float rounding tipped the other way counts as right
            tipped = _near_tie(cases[name], want[name][1]) & (np.abs(q.astype(int) - want[name][0]) <= 1)
            got[name] = (np.where(tipped, want[name][0], q), scales)

    def verdict(name):
        (q, scales), (wq, ws) = got[name], want[name]
        mistakes = [(m, fn(cases[name])) for m, fn in MISTAKES]
        on_q = compare(q.astype(np.float64), wq.astype(np.float64), axes=("row", "column"),
                       mistakes=[(m, out[0].astype(np.float64)) for m, out in mistakes], tol=Tolerance(0.0, 0.0))
        on_scales = compare(scales.astype(np.float64), ws.astype(np.float64), axes=("row", "block"),
                            mistakes=[(m, out[1].astype(np.float64)) for m, out in mistakes], tol=SCALES)
        if not on_q.ok:
            if not on_scales.ok:  # q = w / scale: a wrong scale makes q wrong; say so before the learner looks at q
                on_q.details.append(f"its scales are off too ({on_scales.summary}): q is w / scale, so look at "
                                    "the scales first")
            return on_q, "q"
        return on_scales, "scales"

    return _cases_part(run, "quantize", {name: verdict(name) for name in cases}, MISTAKES,
                       lambda m, fn: all(_same(got[n], fn(cases[n])) for n in cases))


def _same(got: tuple, out: tuple) -> bool:
    return all(a.shape == b.shape and np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=3e-7, atol=0)
               for a, b in zip(got, out))


def _dequantize_part(run: StepRun, dequantize, cases: dict[str, np.ndarray]) -> Part:
    packed = {name: ref.quantize(w) for name, w in cases.items()}
    try:
        got = {name: np.asarray(run.call(dequantize, q.copy(), s.copy())) for name, (q, s) in packed.items()}
    except LearnerError as e:
        return run.add(Part.from_error("dequantize", e))
    verdicts = {name: (compare(got[name].astype(np.float64), ref.dequantize(q, s).astype(np.float64),
                               axes=("row", "column"), mistakes=[(m, fn(q, s).astype(np.float64))
                                                                 for m, fn in DEQUANTIZE_MISTAKES], tol=SCALES), "w")
                for name, (q, s) in packed.items()}
    return _cases_part(run, "dequantize", verdicts, DEQUANTIZE_MISTAKES,
                       lambda m, fn: all(_same((got[n],), (fn(*packed[n]),)) for n in cases))


def _cases_part(run: StepRun, part: str, verdicts: dict, mistakes, matches) -> Part:
    """One part from per-case verdicts {name: (Verdict, what)}: the first failing case shown, a mistake named
    when its outputs equal the learner's on every case (`matches(mistake, fn)`)."""
    failing = [name for name, (v, _) in verdicts.items() if not v.ok]
    if not failing:
        worst = max((v.margin or 0.0) for v, _ in verdicts.values())
        return run.add(Part(part, PASS, f"{len(verdicts)} weights ({', '.join(verdicts)}): equal to the reference",
                            margin=worst))
    first, what = verdicts[failing[0]]
    named = next((m for m, fn in mistakes if matches(m, fn)), None) or first.mistake
    details = [f"right on: {'; '.join(n for n in verdicts if n not in failing) or 'none'}",
               f"{failing[0]}, its {what}: {first.summary}", *(f"  {d}" for d in first.details)]
    if len(failing) > 1:
        details.append(f"also off: {'; '.join(failing[1:])}")
    return run.add(Part(part, FAIL, f"off on {len(failing)} of {len(verdicts)} weights, right on "
                        f"{len(verdicts) - len(failing)}", details, named, first.margin))


# --- the kernel ----------------------------------------------------------------------------------------


def _stride_k_over_block(x, q, s, b):
    """scales read at m * (K // 32) + j, not m * KB + j: right when K is a multiple of 32."""
    flat, whole = s.reshape(-1), q.shape[1] // BLOCK
    rows = np.stack([flat[m * whole:m * whole + s.shape[1]] for m in range(s.shape[0])])
    return step15.expected(x, ref.dequantize(q, rows), b)


def _tail_scale(which):
    """The last block of each row (when K is no multiple of 32) scaled by 1 ("none"), by block 0's scale
    ("first"), or left out ("dropped")."""
    def compute(x, q, s, b):
        if q.shape[1] % BLOCK == 0:
            return step15.expected(x, ref.dequantize(q, s), b)
        s = s.copy()
        s[:, -1] = {"none": 1.0, "dropped": 0.0, "first": s[:, 0]}[which]
        return step15.expected(x, ref.dequantize(q, s), b)
    return compute


KERNEL_MISTAKES = [
    (Mistake("scales-not-applied", "the kernel sums x * q without the scales: every output is off by its blocks' "
             "scales", "w[m, k] = q[m, k] * scales[m, k // 32]: scale each block's sum once, then add them."),
     [lambda x, q, s, b: step15.expected(x, q.astype(np.float32), b)]),
    (Mistake("unsigned-q", "q is read as unsigned bytes (0..255): every negative weight becomes 256 more",
             "q is int8 (DType.int8): -127..127; convert with .cast[DType.float32]() from int8."),
     [lambda x, q, s, b: step15.expected(x, ref.dequantize(q.view(np.uint8).astype(np.float32), s), b)]),
    (Mistake("tail-block-scale", "the last block of a row (its K % 32 columns) is left out or scaled by the wrong "
             "scale (block 0's, or none): right wherever K is a multiple of 32", "The last block of a row holds "
             "the K % 32 columns after the whole blocks, and has a scale of its own: scales[m, KB - 1], KB = "
             "ceil(K / 32). When K is a multiple of 32 there is none: read no scale for it."),
     [_tail_scale("none"), _tail_scale("first"), _tail_scale("dropped")]),
    (Mistake("scales-row-stride", "row m's scales are read from m * (K // 32), not m * KB with KB = ceil(K / 32): "
             "right only when K is a multiple of 32", "scales is [M, KB]: row m's start at m * KB, KB = "
             "scales.dim_size(1)."), [_stride_k_over_block]),
    (Mistake("bias-twice", "the bias is added twice", step15.BIAS_HINT),
     [lambda x, q, s, b: step15.expected(x, ref.dequantize(q, s), None if b is None else 2 * b)]),
    (Mistake("bias-missing", "the bias is not added", "y = x @ dequantize(q, scales).T + b: each output adds its "
             "own b[m] once, after its row's blocks are summed."),
     [lambda x, q, s, b: step15.expected(x, ref.dequantize(q, s), None)]),
]


def kernel_verdict(run: StepRun, cases, results: dict, packed: dict) -> Part:
    """The kernel part of `results`, each case's {name: (x, q, scales, b)} in `packed`: against
    x @ dequantize(q, scales).T + b, a mistake named when its outputs equal the learner's on every case."""
    def named(results, _arrays):
        for mistake, computes in KERNEL_MISTAKES:
            if any(all(compare(results[name][0].astype(np.float64), compute(*args), axes=("row", "output"),
                               mistakes=[], tol=step15.KERNEL).ok for name, args in packed.items())
                   for compute in computes):
                return mistake
        return None

    arrays = {name: (x, ref.dequantize(q, s), b) for name, (x, q, s, b) in packed.items()}
    return step15.judge_kernel(run, cases, results, arrays, named, tail=TAIL, outside=OUTSIDE)


TAIL = step15.Tail((BLOCK,), str(BLOCK), f"each row's last, partial block: its K % {BLOCK} columns, or the scale "
                   "they are multiplied by")
OUTSIDE = (f"an index one row or one block too far, or one before the start: a loop that runs once more than it "
           f"should, the scale of a last block read where K is a multiple of {BLOCK} and there is none, a scale at "
           "index -1")


def _kernel_part(run: StepRun, path: Path, config) -> Part:
    cases = step15.kernel_cases(config)
    packed = {}
    for name, n, k, m, bias in cases:
        x, q, s, *b = kernel_args("matvec_q8", *case_arrays(n, k, m, bias, SEED))  # as the child makes them
        packed[name] = (x, q, s, b[0] if b else None)
    return step15.kernel_part(run, path, cases, lambda results: kernel_verdict(run, cases, results, packed),
                              function="matvec_q8", source="matvec_q8.mojo")


# --- decode and quality --------------------------------------------------------------------------------


def hf_with(checkpoint: Checkpoint, quantize=ref.quantize, dequantize=ref.dequantize):
    """transformers' GPT-2 with every product weight (the tied head's too) replaced by
    dequantize(quantize(.)), by the functions given."""
    from checker.references.reference import load_hf_model

    return ref.dequantize_hf(load_hf_model(checkpoint), quantize, dequantize)


def load_dequantized(eleven, checkpoint: Checkpoint):
    """The learner's step 11 model loaded by their load_hf_weights with the reference's dequantised weights."""
    from max.experimental import functional as F

    from checker.running.loading import stored_tensors

    with F.lazy():
        model = eleven.GPT2LMHeadModel(checkpoint.learner_config())
    eleven.load_hf_weights(model, ref.dequantized_tensors(stored_tensors(checkpoint)))
    return model


def _q8_product(x, q, scales, b):
    """x @ dequantize(q, scales).T + b in MAX's own ops: what gpt2_matvec_q8 computes."""
    from max.dtype import DType
    from max.experimental import functional as F

    m, k, blocks = q.shape[0], q.shape[1], scales.shape[1]
    per_column = F.broadcast_to(scales.reshape([m, blocks, 1]), [m, blocks, BLOCK]).reshape([m, blocks * BLOCK])
    return x @ (F.cast(q, DType.float32) * per_column[:, :k]).T + b


INT8 = step15.KernelDecode("GPT2Quantized", "QuantizedLinear", "matvec_q8", "gpt2_matvec_q8", _q8_product,
                           load_dequantized, hf_with, held_to="transformers on the same dequantised weights")


def text_ids(checkpoint: Checkpoint) -> list[int]:
    """The course's text (checker/references/data/corpus.txt), its first TEXT_TOKENS tokens."""
    from checker.references.synthetic import CORPUS
    from checker.steps.step12 import tokenizer_of

    return tokenizer_of(checkpoint).encode(CORPUS.read_text()).ids[:TEXT_TOKENS]


@functools.cache
def float_logprobs(checkpoint: Checkpoint):
    """transformers float32's log-probabilities [T, V] at every position of text_ids(checkpoint)."""
    from checker.references.reference import load_hf_model

    return _logprobs(load_hf_model(checkpoint), text_ids(checkpoint))


def _logprobs(model, ids: list[int]):
    import torch

    with torch.no_grad():
        return torch.log_softmax(model(torch.tensor([ids])).logits[0].double(), dim=-1)


def quality(checkpoint: Checkpoint, int8_model) -> dict[str, float]:
    """Next-token distributions of transformers float32 and of `int8_model` at every position of the course's
    text: mean KL(float || int8), the share of positions whose top-1 token agrees, each one's perplexity."""
    ids = text_ids(checkpoint)
    p, q = float_logprobs(checkpoint), _logprobs(int8_model, ids)
    kl = (p.exp() * (p - q)).sum(-1)
    nll = {name: -lp[:-1].gather(-1, lp.new_tensor(ids[1:], dtype=int)[:, None]).mean().item()
           for name, lp in (("float", p), ("int8", q))}
    return {"kl": kl.mean().item(), "top1": (p.argmax(-1) == q.argmax(-1)).double().mean().item(),
            "ppl float": float(np.exp(nll["float"])), "ppl int8": float(np.exp(nll["int8"]))}


@functools.cache
def reference_quality(checkpoint: Checkpoint) -> dict[str, float]:
    """quality() of the reference quantiser on `checkpoint`: the same for every check of a process."""
    return quality(checkpoint, hf_with(checkpoint))


def _quality_part(run: StepRun, quantize, dequantize, checkpoint: Checkpoint) -> Part:
    try:
        theirs = run.call(hf_with, checkpoint, quantize, dequantize)
    except LearnerError as e:
        return run.add(Part.from_error("quality", e))
    except Exception as e:  # noqa: BLE001 - their arrays did not fit the weights
        return run.add(Part("quality", FAIL, f"dequantize(*quantize(w)) did not give back a weight of w's shape: {e}"))
    got, reference = quality(checkpoint, theirs), reference_quality(checkpoint)
    bound = QUALITY_BOUND * reference["kl"]
    line = (f"over {len(text_ids(checkpoint))} tokens of the course's text: mean KL(float32 || int8) "
            f"{got['kl']:.2e} (the reference quantiser's {reference['kl']:.2e}, at most {bound:.2e} allowed), top-1 agreement {got['top1']:.1%}")
    if checkpoint.kind in STANDINS:
        line += " (a stand-in's random weights: GPT-2's own, `pixi run weights`, give the figures that mean something)"
    else:
        line += f", perplexity {got['ppl float']:.2f} float32 -> {got['ppl int8']:.2f} int8"
    if got["kl"] <= bound:
        return run.add(Part("quality", PASS, line))
    return run.add(Part("quality", FAIL, f"your int8 weights change the next-token distributions {got['kl'] / reference['kl']:.1f}x "
                        f"as much as the reference quantiser's do (blocks of {BLOCK}, each with its own scale, "
                        f"rounded to the nearest): {line}"))


def timing_part(prefill, both, empty_cache, config) -> Part:
    """A report of speed: never fails (timings vary with the machine and its load)."""
    from checker.references.bandwidth import read_bandwidth, weight_bytes_per_token

    float_name, int8_name = "MAX's float32 products (your step 13)", "your int8 kernel"
    rates, busy = step15.decode_rates({float_name: prefill, int8_name: both}, config, empty_cache)
    per_token = {float_name: weight_bytes_per_token(config), int8_name: int8_bytes_per_token(config)}
    limit = read_bandwidth()
    lines = [f"{name}: {rate:.1f} tokens/s, {per_token[name] / 1e6:.0f} MB per token read at "
             f"{rate * per_token[name] / 1e9:.1f} GB/s ({rate * per_token[name] / limit:.0%} of the "
             f"{limit / 1e9:.1f} GB/s this machine reads now)" for name, rate in rates.items()] + busy
    mine, theirs = rates[int8_name], rates[float_name]
    return Part("timing", PASS, f"a report, not a verdict: decode {mine / theirs:.2f}x as fast on int8 weights "
                f"({mine:.1f} against {theirs:.1f} tokens/s)", lines)


def int8_bytes_per_token(config) -> int:
    """Bytes one int8 decode step reads: each product's weights as int8 plus a float32 scale per BLOCK, its
    bias and the LayerNorms as float32."""
    from checker.references.bandwidth import weight_bytes_per_token

    products = sum(m * k * n for (m, k), (_, n) in step15.products(config).items())
    as_float = weight_bytes_per_token(config)
    return as_float - 4 * products + products + 4 * products // BLOCK


# --- the check -------------------------------------------------------------------------------------------


def check(path: Path, checkpoint: Checkpoint, *, timeout: float = 300.0) -> Report:
    config = checkpoint.learner_config()
    run = StepRun("16", "8-bit weights and your int8 kernel in decode", path, checkpoint,
                  f"quantize on {BLOCK}-column blocks (rows with K no multiple of {BLOCK}, the checkpoint's own "
                  f"weights); {len(step15.kernel_cases(config))} int8 matvec shapes; {step15.NEW_TOKENS} greedy "
                  f"decode steps on dequantised weights, logits {DECODE}", PARTS, timeout=timeout)
    if (opened := run.import_functions(FUNCTIONS, checkpoint)) is None:
        return run.finish("needs " + ", ".join(FUNCTIONS))
    step, fns = opened
    cases = quantize_cases(checkpoint)
    written = [_quantize_part(run, fns["quantize"], cases), _dequantize_part(run, fns["dequantize"], cases)]
    if any(p.status == TODO for p in written):
        return run.finish("runs once quantize and dequantize are written")
    _quality_part(run, fns["quantize"], fns["dequantize"], checkpoint)  # what a broken quantiser costs, too
    if any(p.status != PASS for p in run.report.parts):
        return run.finish("runs once quantize, dequantize and quality pass")
    if _kernel_part(run, path, config).status != PASS:
        return run.finish("runs once the kernel passes")
    used = used_modules(step)
    if "11" not in used or "13" not in used:
        run.add(Part("decode", FAIL, "step 16 builds on your steps 11 and 13: import GPT2LMHeadModel and "
                     "load_hf_weights from steps.step_11, GPT2WithCache from steps.step_13"))
    elif (graphs := step15.decode_part(run, step, used, checkpoint, INT8)) is not None:
        run.add(timing_part(*graphs, config))
    return run.finish("runs once decode passes")


CATALOGUE = [m for m, _ in MISTAKES] + [m for m, _ in DEQUANTIZE_MISTAKES] + [m for m, _ in KERNEL_MISTAKES] + \
    [step15.RACE]
register(Step("16", check, CATALOGUE))
