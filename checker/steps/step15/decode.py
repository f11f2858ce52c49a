"""Decode through the learner's custom op against Hugging Face: op by op first, then compiled as
`pixi run gpt2` runs it, the op counted at every product; when it is off, the same decode again with
MAX's own products in place of the op tells whether the kernel is the cause. Then a timing report.
Steps 15 and 16 share it (KernelDecode says what differs).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from checker.diagnosis.stream import place_positions, recording
from checker.harness.runner import StepRun
from checker.reporting.compare import DECODE, compare
from checker.reporting.report import FAIL, PASS, Part
from checker.steps.step15.reference import KERNEL
from runtime.bandwidth import products, read_bandwidth, weight_bytes_per_token
from runtime.checkpoints import Checkpoint
from runtime.compiling import compile_decode, compile_with_cache, load_gpt2, prefill_then_decode
from runtime.decoding import decode_rates, greedy_steps
from runtime.hf import load_hf_model
from runtime.learner import LearnerError

# MAX and torch are imported inside the functions that use them: importing them takes seconds.

NEW_TOKENS = 12
EAGER_TOKENS = 3  # op by op first: the prompt's token and two decode steps (an op at a time is ~20x slower)
PROMPT_LENGTH = 9
ATTENTION = ("the attention with the cache (the keys and values of earlier positions it reads back, the new ones it "
             "adds, the scale)")


@contextlib.contextmanager
def counting_kernel_calls():
    """Records the custom op calls made inside the block (op by op, or while a graph is traced): yields a list
    of (op name, its weight's [M, K]: the shape of its second input; None where that is no tensor or its
    shape holds a symbol, as another op of the learner's may have)."""
    from max.experimental.custom import CustomOp

    calls, original = [], CustomOp.__call__

    def static(tensor) -> tuple[int, ...] | None:
        try:
            return tuple(int(d) for d in tensor.shape)
        except (AttributeError, TypeError):
            return None

    def counted(self, *args, **kwargs):
        calls.append((self.name, static(args[1]) if len(args) > 1 else None))
        return original(self, *args, **kwargs)

    CustomOp.__call__ = counted
    try:
        yield calls
    finally:
        CustomOp.__call__ = original


def kernel_calls_problem(calls: list[tuple[str, tuple | None]], op: str, config) -> str | None:
    """None when the calls of `op` in `calls` (counting_kernel_calls, over one decode step or more) are every
    product of each step once, a product perhaps cut into products of its weight's rows (c_attn as q's, k's
    and v's: the same rows of weight read for each input width); else how many a step makes, and which
    products go without the kernel or through it too often."""
    want = products(config)
    got: dict = {}
    for name, shape in calls:
        if name == op:
            got[shape] = got.get(shape, 0) + 1
    wanted, read = _rows_by_width({shape: n for shape, (_, n) in want.items()}), _rows_by_width(got)
    cut_steps = max(1, round(sum(read.values()) / sum(wanted.values())))  # the steps, by the rows read
    if read == {width: rows * cut_steps for width, rows in wanted.items()}:
        return None
    steps = max((got.get(shape, 0) // n for shape, (_, n) in want.items()), default=0) or 1
    off = [f"{names} {got.get(shape, 0) / steps:g} times a step, {n} expected" + (
               " (not through your kernel)" if not got.get(shape) else "")
           for shape, (names, n) in want.items() if got.get(shape, 0) != n * steps]
    off += [f"a weight of shape {list(shape)}, none expected" for shape in got if shape and shape not in want]
    if not off:
        return None
    expected = sum(n for _, n in want.values())
    return (f"a decode step calls your kernel {sum(got.values()) / steps:g} times, {expected} expected: 4 per block "
            f"(c_attn, attn.c_proj, c_fc, mlp.c_proj) x {config.n_layer} and the tied head; by product: "
            f"{'; '.join(off)}")


def _rows_by_width(counts: dict) -> dict[int, int]:
    """{K: the rows of [M, K] weights read}, from {(M, K) or None: how many products of that shape}."""
    rows: dict[int, int] = {}
    for shape, n in counts.items():
        if shape:
            rows[shape[1]] = rows.get(shape[1], 0) + shape[0] * n
    return rows


def _product(x, w, b):
    return x @ w.T + b


@contextlib.contextmanager
def max_products(op: str = "gpt2_matvec", product=_product):
    """While a graph is traced or runs op by op, every call of the custom op `op` computes product(*its inputs)
    with MAX's own ops instead (x @ w.T + b for gpt2_matvec): the learner's decode with their kernel taken out.
    Yields the set the names of the other custom ops called meanwhile go into (the learner's own, still run)."""
    from max.experimental.custom import CustomOp

    original = CustomOp.__call__
    others: set[str] = set()

    def replaced(self, *args, **kwargs):
        if self.name == op:
            return product(*args)
        others.add(self.name)
        return original(self, *args, **kwargs)

    CustomOp.__call__ = replaced
    try:
        yield others
    finally:
        CustomOp.__call__ = original


def kernel_linear_problem(kernel_linear, model) -> str | None:
    """What is wrong with the learner's KernelLinear around the model's first Linear, run eagerly on
    x [2, 1, in] (decode's shape at batch 2), or None when it gives x @ weight.T + bias [2, 1, out]."""
    from max.experimental.nn import Linear
    from max.experimental.tensor import Tensor

    name, linear = next((n, m) for n, m in model.descendants if isinstance(m, Linear))
    w, b = (np.from_dlpack(t).astype(np.float64) for t in (linear.weight, linear.bias))
    x = np.random.default_rng(15).standard_normal((2, 1, w.shape[1]), dtype=np.float32)
    y = kernel_linear(linear)(Tensor.from_dlpack(x))
    what = f"KernelLinear({name}) on x [2, 1, {w.shape[1]}]"
    if y is None:
        return f"{what} returned None: is a `return` missing?"
    got, want = np.from_dlpack(y).astype(np.float64), x.astype(np.float64) @ w.T + b
    if got.shape != want.shape:
        return (f"{what} returned shape {list(got.shape)}, {list(want.shape)} expected: the kernel's [N, out] "
                "rows go back to [B, 1, out]")
    verdict = compare(got, want, axes=("row", "position", "output"), mistakes=[], tol=KERNEL)
    return None if verdict.ok else (f"{what} differs from x @ weight.T + bias: {verdict.summary}; your kernel "
                                    "passed alone, so look at the weight and bias KernelLinear holds and hands it")


@dataclass(frozen=True)
class KernelDecode:
    """A decode whose products go through the learner's custom op: step 15's, or step 16's on int8 weights."""

    model: str  # the learner's class: "GPT2WithKernel"
    linear: str  # its Linear's stand-in: "KernelLinear"
    function: str  # the learner's function that calls the op: "matvec"
    op: str  # the custom op: "gpt2_matvec"
    product: Callable  # MAX's ops for what the op computes, from its inputs (max_products)
    load: Callable  # (step 11 module, checkpoint) -> the learner's loaded step 11 model
    reference: Callable  # checkpoint -> the Hugging Face model the decode is held to
    before: Callable | None = None  # (step module, model) -> a problem found before decode runs, or None
    held_to: str = "Hugging Face"  # what the reference is, in the report's words


def _load(eleven, checkpoint: Checkpoint):
    return load_gpt2(eleven.GPT2LMHeadModel, eleven.load_hf_weights, checkpoint)


def _hf(checkpoint: Checkpoint):
    return load_hf_model(checkpoint)


FLOAT32 = KernelDecode("GPT2WithKernel", "KernelLinear", "matvec", "gpt2_matvec", _product, _load, _hf,
                       lambda step, model: kernel_linear_problem(step.KernelLinear, model))


def decode_part(run: StepRun, step, used, checkpoint: Checkpoint, spec: KernelDecode = FLOAT32):
    """Returns (step 13's graph, the prefill-then-decode run, the learner's empty_cache) when it passes.

    The decode steps run op by op first (seconds: MAX's ops are compiled already, by the earlier steps): a
    wrong decode is answered without compiling. Only a decode right op by op is compiled, as `pixi run gpt2`
    runs it, and checked again (a fault only compilation shows)."""
    config = checkpoint.learner_config()
    eleven, thirteen = used["11"], used["13"]
    build = getattr(step, spec.model)
    prompt = np.random.default_rng(15).integers(0, min(config.vocab_size, 400), PROMPT_LENGTH).tolist()
    print(f"(running your {spec.model} op by op: seconds; then, if it is right, compiled for one position as "
          "pixi run gpt2 runs it: about a minute after a change on 2 cores)", file=sys.stderr, flush=True)
    try:
        model = run.call(spec.load, eleven, checkpoint)
        if spec.before is not None and (problem := run.call(spec.before, step, model)) is not None:
            run.add(Part("decode", FAIL, problem))
            return None
        prefill = run.call(compile_with_cache, thirteen.GPT2WithCache(model), config)  # before the kernel goes in
        built, recorded = run.call(build, model), []
        with counting_kernel_calls() as calls, recording(recorded, built):
            ids, decoded = run.call(greedy_steps, prefill_then_decode(prefill, built), config, thirteen.empty_cache,
                                    prompt, EAGER_TOKENS)
    except LearnerError as e:
        run.add(Part.from_error("decode", e))
        return None
    if (problem := kernel_calls_problem(calls, spec.op, config)) is not None:
        run.add(Part("decode", FAIL, problem))
        return None
    reference = DecodeReference(spec.reference(checkpoint), prompt)
    if (failed := reference.problems(ids, decoded)) is not None:
        verdict, problems = failed
        summary = f"the decode steps through your kernel (run op by op) differ from {spec.held_to}: {verdict.summary}"
        print(f"(decode FAILS: {summary}; running it again with MAX's products in place of your kernel, to tell "
              "whether the kernel is the cause: seconds; the report follows)", file=sys.stderr, flush=True)
        problems += place_positions(recorded, reference.hf, prompt + ids[:-1], len(prompt), len(prompt),
                                    config.n_layer, attention=lambda i: ATTENTION,
                                    logits=(np.stack(decoded), reference.logits(ids)))
        problems.append(_without_kernel(run, build, eleven, checkpoint, prefill, thirteen, reference, spec,
                                        compiled=False))
        run.add(Part("decode", FAIL, summary, problems, margin=verdict.margin))
        return None
    try:
        with counting_kernel_calls() as calls:  # built anew on a model of its own: a build may change its model
            decode = run.call(compile_decode, run.call(build, run.call(spec.load, eleven, checkpoint)), config)
        both = prefill_then_decode(prefill, decode)
        ids, decoded = run.call(greedy_steps, both, config, thirteen.empty_cache, prompt, NEW_TOKENS)
    except LearnerError as e:
        run.add(Part.from_error("decode", e))
        return None
    if (problem := kernel_calls_problem(calls, spec.op, config)) is not None:
        run.add(Part("decode", FAIL, problem))
        return None
    if (failed := reference.problems(ids, decoded)) is not None:
        verdict, problems = failed
        summary = (f"the decode steps through your kernel differ from {spec.held_to} once compiled, though right op "
                   f"by op: {verdict.summary}")
        print(f"(decode FAILS: {summary}; compiling your decode again with MAX's products in place of your kernel, "
              "to tell whether the kernel is the cause: about a minute after a change; the report follows)",
              file=sys.stderr, flush=True)
        problems.append(_without_kernel(run, build, eleven, checkpoint, prefill, thirteen, reference, spec,
                                        compiled=True))
        run.add(Part("decode", FAIL, summary, problems, margin=verdict.margin))
        return None
    verdict = reference.verdict(ids, decoded)
    per_step = sum(n for _, n in products(config).values())
    run.add(Part("decode", PASS, f"{NEW_TOKENS} greedy ids and {NEW_TOKENS - 1} decode steps through your kernel "
                 f"({per_step} calls each), op by op and compiled, match {spec.held_to}: {verdict.summary}",
                 margin=verdict.margin))
    return prefill, both, thirteen.empty_cache


def ids_differ(ids: list[int], theirs: list[int]) -> str:
    """Where two greedy continuations part, and four new tokens of each from there, both windows alike."""
    i = next((i for i, (a, b) in enumerate(zip(ids, theirs)) if a != b), min(len(ids), len(theirs)))
    end = min(i + 4, max(len(ids), len(theirs)))
    return (f"greedy ids differ from transformers' from new token {i} (counted from 0): new tokens {i}..{end - 1}, "
            f"yours {ids[i:end]}, transformers' {theirs[i:end]}")


class DecodeReference:
    """Hugging Face on the check's prompt: each decode step's logits for the ids a decode chose, and
    transformers' own greedy ids."""

    def __init__(self, hf, prompt: list[int]):
        import torch

        self.hf, self.prompt = hf, prompt
        with torch.no_grad():
            self.theirs = self.hf.generate(
                torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=None,
                pad_token_id=0)[0, len(prompt):].tolist()

    def _forward(self, ids: list[int]) -> np.ndarray:
        """[n + len(ids), V]: Hugging Face's logits at every position of the prompt followed by `ids` (a hook on
        it, step 17's `fed`, sees those positions)."""
        import torch

        with torch.no_grad():
            return self.hf(torch.tensor([self.prompt + ids])).logits[0].double().numpy()

    def logits(self, ids: list[int]) -> np.ndarray:
        """[len(ids) - 1, V]: Hugging Face's logits at each decode step of the prompt followed by `ids`."""
        n = len(self.prompt)
        return self._forward(ids)[n:n + len(ids) - 1]

    def prompt_problem(self, logits: np.ndarray, ids: list[int]) -> str | None:
        """What is wrong with the prompt's pass's logits [V] (which pick the first new token), against Hugging
        Face's at the prompt's last position; the prompt position whose logits they are, if any. None if right.
        Hugging Face runs on the prompt and `ids`, as for the decode steps' logits."""
        n = len(self.prompt)
        theirs = self._forward(ids)[:n]  # [n, V]
        verdict = compare(logits, theirs[-1], axes=("vocab",), mistakes=[], tol=DECODE)
        if verdict.ok:
            return None
        at = next((p for p in range(n - 1)
                   if compare(logits, theirs[p], axes=("vocab",), mistakes=[], tol=DECODE).ok), None)
        return (f"the prompt's pass, whose logits pick new token 0: they differ from Hugging Face's at the prompt's "
                f"last position ({verdict.summary})" + (
                    f"; they are its logits at position {at} of the {n}: the logits forward returns are the last "
                    "position's, x[:, -1, :]" if at is not None else ""))

    def verdict(self, ids: list[int], decoded: list[np.ndarray]):
        return compare(np.stack(decoded), self.logits(ids), axes=("decode step", "vocab"), mistakes=[], tol=DECODE)

    def problems(self, ids: list[int], decoded: list[np.ndarray], first: list[np.ndarray] | None = None):
        """None when the decode is right; else (the logits' verdict, the lines that say what differs). `first`:
        the prompt's pass's logits (greedy_steps'), to tell a first new token that differs."""
        verdict = self.verdict(ids, decoded)
        if verdict.ok and ids == self.theirs[:len(ids)]:
            return None
        problems = []
        if ids != self.theirs[:len(ids)]:
            problems.append(ids_differ(ids, self.theirs[:len(ids)]))
            if first and ids[0] != self.theirs[0] and (line := self.prompt_problem(first[0], ids)):
                problems.append(line)
        if not verdict.ok:
            problems += [f"decode-step logits: {verdict.summary}", *verdict.details]
        return verdict, problems


def _without_kernel(run: StepRun, build, eleven, checkpoint: Checkpoint, prefill, thirteen,
                    reference: DecodeReference, spec: KernelDecode, *, compiled: bool) -> str:
    """The learner's decode again (op by op, or `compiled`), built on a model loaded anew, every call of the
    kernel's op made MAX's own product (max_products): where the cause is, in one line. The same wrong
    numbers without the kernel put it outside the kernel."""
    config = checkpoint.learner_config()
    instead = f"with MAX's products in place of your kernel (every {spec.op} call computed by MAX's own ops)"
    try:
        with max_products(spec.op, spec.product) as others:
            plain = run.call(build, run.call(spec.load, eleven, checkpoint))
            if compiled:
                plain = run.call(compile_decode, plain, config)
            ids, decoded = run.call(greedy_steps, prefill_then_decode(prefill, plain), config, thirteen.empty_cache,
                                    reference.prompt, NEW_TOKENS if compiled else EAGER_TOKENS)
    except LearnerError as e:
        return f"your decode with MAX's products in place of your kernel could not run either ({e}): the cause is " \
               f"outside the kernel, in {spec.model} or {spec.linear}"
    if reference.problems(ids, decoded) is None:
        return (f"{instead}, your decode is right: the kernel is the cause, as decode calls it (it passed alone on "
                "these shapes: look at what differs in decode: x's rows one per sequence, the head's M of "
                f"{config.vocab_size}, calls one after another)")
    yours = (f"; and your other custom op{'s' if len(others) > 1 else ''} {', '.join(sorted(others))}, which this "
             "decode still ran as you wrote it (first, if its outputs hold NaN: a read past a tensor's end)"
             if others else "")
    return (f"{instead}, your decode is still off ({reference.verdict(ids, decoded).summary}): the cause is outside "
            f"the kernel {spec.function}: in what {spec.model} and {spec.linear} hand it (which weights and bias, the "
            f"reshapes around it, the head's weight: wte, tied) or in the decode step around it ({spec.model}.forward "
            f"and what it calls: its blocks, layer norms and attention, step 13's or your own){yours}")


def timing_part(prefill, both, empty_cache, config) -> Part:
    """A report of speed: never fails (timings vary with the machine and its load)."""
    rates, busy = decode_rates({"MAX's products (your step 13)": prefill, "your kernel": both}, config, empty_cache)
    per_token = weight_bytes_per_token(config)
    limit = read_bandwidth()
    lines = [f"{name}: {rate:.1f} tokens/s, reading the weights at {rate * per_token / 1e9:.1f} GB/s "
             f"({rate * per_token / limit:.0%} of the {limit / 1e9:.1f} GB/s this machine reads now)"
             for name, rate in rates.items()] + busy
    mine, theirs = rates["your kernel"], rates["MAX's products (your step 13)"]
    return Part("timing", PASS, f"a report, not a verdict: decode {mine / theirs:.2f}x as fast with your kernel "
                f"({mine:.1f} against {theirs:.1f} tokens/s; {per_token / 1e6:.0f} MB of weights per token)", lines)
