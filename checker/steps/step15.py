"""Step 15: the learner's Mojo kernel for decode's weight products, against numpy and Hugging Face.

Parts:

  earlier steps  the steps this file uses pass their own checks
  kernel         the learner's matvec (their Mojo, in a child process: checker.running.mojo) on KERNEL_CASES:
                 shapes whose K and M are no multiple of a vector width or of a task's rows, more than
                 one row of x, and each of GPT-2's products (c_attn, attn.c_proj, c_fc, mlp.c_proj, the
                 head) at one position, each run REPEATS times; against numpy in float64
  decode         GPT2WithKernel compiled for one position (input_ids [B, 1]), after the prompt ran
                 through the learner's step 13 model: each decode step's logits against Hugging Face at
                 the same position, the greedy ids against transformers' generate, and the kernel
                 called for every product of a decode step (4 per block and the head)
  timing         a report, not a verdict: decode tokens/s with the kernel and with MAX's products
                 (step 13's graph) in the same run, the weight bytes each reads per second, and the
                 machine's read bandwidth measured now (the limit)

A mistake is named only when the learner's output equals what it computes on every case (see
MISTAKES), or, for a race, when the same input gave different outputs.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from checker.reporting.compare import DECODE, Mistake, Tolerance, compare
from checker.harness.deps import used_modules
from checker.running.learner import LearnerError
from checker.running.mojo import REPEATS, case_arrays, run_probe
from checker.reporting.report import FAIL, PASS, Part, Report
from checker.harness.runner import StepRun
from checker.references.weights import Checkpoint
from checker.registry import Step, register

FUNCTIONS = ("matvec", "KernelLinear", "GPT2WithKernel")
PARTS = ["earlier steps", "kernel", "decode", "timing"]
NEW_TOKENS = 12
EAGER_TOKENS = 3  # op by op first: the prompt's token and two decode steps (an op at a time is ~20x slower)
PROMPT_LENGTH = 9
# float32 sums of up to 3072 products against float64: the solution stays under 0.1 of this on every
# case (tests/test_step15.py holds it under CORRECT_MARGIN); a dropped term of a sum is 10-1000x over.
KERNEL = Tolerance(2e-5)
WIDTHS = (4, 8, 16, 32, 64)  # vector widths a learner may choose: the tail they leave depends on it


def kernel_cases(config) -> list[tuple[str, int, int, int, bool]]:
    """(name, N, K, M, bias): x [N, K], w [M, K], b [M]; small shapes with remainders (K and M no
    multiple of a vector or a band of rows, M below the tasks, K below one vector, N above 1), then
    GPT-2's. Each is named by its shapes only: which dimension fails is read from the pattern (dimension)."""
    c, inner, v = config.n_embd, config.n_inner or 4 * config.n_embd, config.vocab_size
    small = [(1, 37, 53), (1, 50, 7), (2, 5, 11), (3, 100, 29)]
    gpt2 = [("c_attn", c, 3 * c), ("attn.c_proj", c, c), ("c_fc", c, inner), ("mlp.c_proj", inner, c)]
    return [(_shape(n, k, m), n, k, m, True) for n, k, m in small] + \
        [(f"{name} {_shape(1, k, m)}", 1, k, m, True) for name, k, m in gpt2] + \
        [(f"head {_shape(1, c, v)}, no bias", 1, c, v, False)]


# --- what a kernel computes, and its mistakes -------------------------------------------------------


def expected(x, w, b) -> np.ndarray:
    y = x.astype(np.float64) @ w.astype(np.float64).T
    return y if b is None else y + b


def _tail_dropped(width: int):
    def compute(x, w, b):
        whole = x.shape[1] // width * width
        return expected(x[:, :whole], w[:, :whole], b)
    return compute


BIAS_HINT = ("Add b[m] once per output, after the row's sum is complete: not inside a loop that runs more than "
             "once per output.")
MISTAKES = [
    (Mistake("tail-dropped", "the last K % width columns of each row are left out: the loop after the whole "
             "vectors (the tail) is missing or never runs", "When K is not a multiple of your vector width, the "
             "columns after the last whole vector still count: a scalar loop over them, after the vector loop."),
     [_tail_dropped(width) for width in WIDTHS]),
    (Mistake("bias-twice", "the bias is added twice", BIAS_HINT),
     [lambda x, w, b: expected(x, w, None if b is None else 2 * b)]),
    (Mistake("bias-missing", "the bias is not added", "y = x @ w.T + b: each output adds its own b[m]."),
     [lambda x, w, b: expected(x, w, None)]),
    (Mistake("x-row-stride", "every row of y is computed from x's first row: x is read at k, not at row n's "
             "start n * K + k", "x is [N, K] in one block of memory: row n starts at n * K."),
     [lambda x, w, b: expected(np.repeat(x[:1], len(x), axis=0), w, b)]),
    (Mistake("w-transposed", "w is read as if it were [K, M] (w[k * M + m]), not the Linear's [M, K] "
             "(w[m * K + k])", "A Linear's weight is [out, in]: output m's K weights are row m, contiguous, "
             "starting at m * K."),
     [lambda x, w, b: expected(x, w.reshape(-1).reshape(w.shape[1], w.shape[0]).T, b)]),
]
RACE = Mistake("race", "the same input gives different outputs from run to run: two tasks write (or add into) "
               "the same outputs at the same time, or some outputs are never written (y keeps whatever its memory "
               "held: a wrong index for y, or rows no task takes)", "Each task takes rows of its own, and every "
               "y[n, m], at n * M + m, is written exactly once: sum into a local variable, then store it.")
CATALOGUE = [m for m, _ in MISTAKES] + [RACE]


def _bias_times(results: dict, arrays: dict) -> Mistake | None:
    """The bias added c times (one integer c, not 1) on every case with a bias, and the cases without one
    right: named with its count. c = 0 and 2 are in MISTAKES; this names any other (a SIMD accumulator
    started at b adds it once per lane)."""
    times = set()
    for name, (x, w, b) in arrays.items():
        y, want = results[name][0].astype(np.float64), expected(x, w, None)
        if b is not None:
            times.add(c := round(float(np.sum((y - want) * b) / (len(y) * np.sum(b.astype(np.float64) ** 2)))))
            want = want + c * b
        if len(times) > 1 or not compare(y, want, axes=("row", "output"), mistakes=[], tol=KERNEL).ok:
            return None
    if len(times) != 1 or 1 in times:
        return None
    return Mistake("bias-times", f"the bias is added {times.pop()} times to each output, not once",
                   BIAS_HINT + " A SIMD accumulator that starts at b[m] adds it once per lane.")


def _named(results: dict, arrays: dict) -> Mistake | None:
    """The mistake whose outputs the learner's equal on every case, if one does (`arrays`: each case's
    (x, w, b))."""
    for mistake, computes in MISTAKES:
        for compute in computes:
            if all(compare(results[name][0].astype(np.float64), compute(*args), axes=("row", "output"), mistakes=[],
                           tol=KERNEL).ok for name, args in arrays.items()):
                return mistake
    return _bias_times(results, arrays)


def _shape(n: int, k: int, m: int) -> str:
    return f"x [{n}, {k}] w [{m}, {k}]"


@dataclass(frozen=True)
class Tail:
    """What a tail of K is in a kernel: the widths whose multiples it is not, and the columns it holds."""

    widths: tuple[int, ...]
    unit: str  # "your vector width"
    columns: str  # "the columns after the last whole vector of each row"


VECTOR_TAIL = Tail(WIDTHS, "your vector width", "the columns after the last whole vector of each row")


def dimension(cases, results: dict, arrays: dict, tail: Tail = VECTOR_TAIL) -> list[str]:
    """Which dimension makes the failing cases fail, read from the pattern across all the cases and, within
    each, from which outputs are off: a tail of K (off exactly where K is no multiple of one of tail.widths),
    the last outputs of M (those after whole bands of rows), rows of x after the first, or every shape with
    more than one row of x (an index by n). [] when no single
    dimension explains it."""
    bad = {}
    for name, n, k, m, _ in cases:
        x, w, b = arrays[name]
        y = results[name][0].astype(np.float64)
        want = expected(x, w, b)
        if y.shape != want.shape:
            return []
        bad[name] = np.abs(y - want) > KERNEL.allowed(want)
    failing = {name for name, cells in bad.items() if cells.any()}
    if not failing:
        return []
    shapes = {name: (n, k, m) for name, n, k, m, _ in cases}
    fits = [width for width in tail.widths if failing == {name for name, (_, k, _) in shapes.items() if k % width}]
    if fits:  # the tail of K: failing exactly where K is no multiple of a vector width
        ks = ", ".join(map(str, sorted({shapes[name][1] for name in failing})))
        right = ", ".join(map(str, sorted({k for name, (_, k, _) in shapes.items() if name not in failing})))
        width = f"{fits[0]}" if len(fits) == 1 else f"{tail.unit} ({' or '.join(map(str, fits))} fit)"
        return [f"the tail of K: off on every shape whose K is no multiple of {width} (K = {ks}), right on every "
                f"K that is (K = {right}): {tail.columns}"]
    tails = {}
    for name in failing:  # the last outputs of M: every bad output at the end of its row of y
        n, k, m = shapes[name]
        columns = np.flatnonzero(bad[name].any(axis=0))
        if len(columns) and np.array_equal(columns, np.arange(columns[0], m)):
            tails[name] = m - columns[0]
    if len(tails) == len(failing) and any(t < shapes[name][2] for name, t in tails.items()):
        listed = "; ".join(f"the last {t} of M = {shapes[name][2]}" for name, t in sorted(tails.items()))
        return [f"the last outputs of M: on each failing shape only its last outputs are off ({listed}): the rows "
                "of w after the last whole band a task takes"]
    listed = ", ".join(_shape(*shapes[name]) for name in sorted(failing))
    if all(shapes[name][0] > 1 and not bad[name][0].any() for name in failing):
        return [f"rows of x after the first: off only on shapes with more than one row of x ({listed}), and "
                "there only on rows 1 and up; row 0 is right"]
    if failing == {name for name, (n, _, _) in shapes.items() if n > 1}:
        return [f"rows of x: off on every shape with more than one row of x ({listed}), right on every shape with "
                "one: how the row n enters an index (x's row n starts at n * K, y's at n * M)"]
    return []


# --- the check ------------------------------------------------------------------------------------


def check(path: Path, checkpoint: Checkpoint, *, timeout: float = 300.0) -> Report:
    config = checkpoint.learner_config()
    run = StepRun("15", "your Mojo kernel in decode", path, checkpoint,
                  f"{len(kernel_cases(config))} matvec shapes (remainders, then GPT-2's products), {REPEATS} runs "
                  f"each, {KERNEL}; then {NEW_TOKENS} greedy decode steps, logits {DECODE}", PARTS, timeout=timeout)
    if (opened := run.import_functions(FUNCTIONS, checkpoint)) is None:
        return run.finish("needs " + ", ".join(FUNCTIONS))
    step, fns = opened
    kernel = _kernel_part(run, path, config)
    if kernel.status != PASS:
        return run.finish("runs once the kernel passes")
    used = used_modules(step)
    if "11" not in used or "13" not in used:
        run.add(Part("decode", FAIL, "step 15 builds on your steps 11 and 13: import GPT2LMHeadModel and "
                     "load_hf_weights from steps.step_11, GPT2WithCache from steps.step_13"))
        return run.finish("runs once decode passes")
    graphs = decode_part(run, step, used, checkpoint)
    if graphs is not None:
        run.add(timing_part(*graphs, config))
    return run.finish("runs once decode passes")


def _kernel_part(run: StepRun, path: Path, config) -> Part:
    from checker.running.mojo import SEED

    cases = kernel_cases(config)
    arrays = {name: case_arrays(n, k, m, bias, SEED) for name, n, k, m, bias in cases}  # drawn once, as the child drew
    return kernel_part(run, path, cases, lambda results: judge_kernel(run, cases, results, arrays, _named))


def kernel_part(run: StepRun, path: Path, cases, judge, *, function: str = "matvec",
                source: str = "matvec.mojo") -> Part:
    """The learner's `function` (their Mojo kernel, `source`) on `cases` in a child process; `judge(results)`
    makes the part of what it computed."""
    print(f"(building your Mojo kernel and running it in a separate process: about a minute after a change to "
          f"{source} on 2 cores, seconds when unchanged)", file=sys.stderr, flush=True)
    try:
        results = run_probe(path, cases, timeout=max(run.timeout, 300), function=function)
    except LearnerError as e:
        return run.add(Part.from_error("kernel", e))
    return judge(results)


OUTSIDE = "an index one row or one vector too far, as a loop that runs once more than it should"


def judge_kernel(run: StepRun, cases, results: dict, arrays: dict, named, *, tail: Tail = VECTOR_TAIL,
                 outside: str = OUTSIDE) -> Part:
    """The kernel part of `results` {name: [R, N, M]}: each case's outputs against expected(x, w, b) from
    `arrays` {name: (x, w, b)} (w: the weights the kernel multiplies by); `named(results, arrays)` names a
    mistake the outputs equal, or None. `tail` and `outside` word a failing tail of K and a read outside a
    tensor for this kernel."""
    raced = [name for name, *_ in cases  # NaN, as NaN, is no difference between runs
             if not all(np.array_equal(r, results[name][0], equal_nan=True) for r in results[name][1:])]
    verdicts = {name: compare(results[name][0].astype(np.float64), expected(*args), axes=("row", "output"),
                              mistakes=[], tol=KERNEL)
                for name, args in arrays.items()}
    failing = [name for name, v in verdicts.items() if not v.ok]
    margin = max((v.margin or 0.0) for v in verdicts.values())
    shown = [*raced, *(name for name in failing if name not in raced)]
    details = [] if raced else dimension(cases, results, arrays, tail)
    nan = [name for name in failing if np.isnan(results[name][0]).any()]
    if nan:
        details.insert(0, f"NaN in the outputs on {'; '.join(nan)}, from finite inputs: your kernel reads outside "
                          f"a tensor (the check puts NaN right before and after each input): {outside}")
    details.append(f"right on: {'; '.join(name for name in verdicts if name not in shown) or 'none'}")
    for name in shown[:4]:
        varies = " (different in each run)" if name in raced else ""
        details += [f"{name}{varies}: {verdicts[name].summary}", *(f"  {d}" for d in verdicts[name].details)]
    if len(shown) > 4:
        details.append(f"and {len(shown) - 4} more: {'; '.join(shown[4:])}")
    if raced:
        return run.add(Part("kernel", FAIL, f"the same input gave different outputs in {REPEATS} runs on "
                            f"{len(raced)} of {len(cases)} shapes; off on {len(failing)}", details, RACE))
    if not failing:
        return run.add(Part("kernel", PASS, f"{len(cases)} shapes, {REPEATS} runs each, the same every run; worst "
                            f"{margin:.2f} of allowed", margin=margin))
    return run.add(Part("kernel", FAIL, f"off on {len(failing)} of {len(cases)} shapes, right on "
                        f"{len(cases) - len(failing)}", details, named(results, arrays), margin))


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


def products(config) -> dict[tuple[int, int], tuple[str, int]]:
    """A decode step's weight products by their weight's [M, K]: {shape: (names, how many a step)}."""
    c, inner = config.n_embd, config.n_inner or 4 * config.n_embd
    found: dict[tuple[int, int], tuple[str, int]] = {}
    for shape, name, count in (((3 * c, c), "c_attn", config.n_layer), ((c, c), "attn.c_proj", config.n_layer),
                               ((inner, c), "c_fc", config.n_layer), ((c, inner), "mlp.c_proj", config.n_layer),
                               ((config.vocab_size, c), "the tied head", 1)):
        names, n = found.get(shape, ("", 0))
        found[shape] = (f"{names} or {name}" if names else name, n + count)
    return found


def kernel_calls_problem(calls: list[tuple[str, tuple | None]], op: str, config) -> str | None:
    """None when the calls of `op` in `calls` (counting_kernel_calls, over one decode step or more) are every
    product of each step once; else how many a step makes, and which products go without the kernel or
    through it too often."""
    want = products(config)
    got: dict = {}
    for name, shape in calls:
        if name == op:
            got[shape] = got.get(shape, 0) + 1
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


def _product(x, w, b):
    return x @ w.T + b


@contextlib.contextmanager
def max_products(op: str = "gpt2_matvec", product=_product):
    """While a graph is traced or runs op by op, every call of the custom op `op` computes product(*its inputs)
    with MAX's own ops instead (x @ w.T + b for gpt2_matvec): the learner's decode with their kernel taken out."""
    from max.experimental.custom import CustomOp

    original = CustomOp.__call__

    def replaced(self, *args, **kwargs):
        return product(*args) if self.name == op else original(self, *args, **kwargs)

    CustomOp.__call__ = replaced
    try:
        yield
    finally:
        CustomOp.__call__ = original


def compile_decode(module, config):
    """`module` (a GPT2WithKernel) compiled for decode: ids [batch, 1] (the batch symbolic), 2L caches
    [batch, H, past, D]; the prompt runs through step 13's graph, so a kernel never reads W once per row."""
    from checker.diagnosis.compiled import compile_with_cache

    return compile_with_cache(module, config, seq=None)


def prefill_then_decode(prefill, decode):
    """One callable for a generate loop: the prompt (more than one position) through `prefill`, then
    each one-position step through `decode`."""
    def run(input_ids, *cache):
        return (decode if input_ids.shape[-1] == 1 else prefill)(input_ids, *cache)
    return run


def greedy_steps(run, config, empty_cache, prompt: list[int], steps: int) -> tuple[list[int], list[np.ndarray]]:
    """Greedy generation: the new ids, and the logits [V] each decode step gave (after the first token)."""
    from max.experimental.tensor import Tensor

    logits, *cache = run(Tensor.from_dlpack(np.array([prompt], np.int64)), *empty_cache(config, 1))
    ids, decoded = [int(np.from_dlpack(logits)[0].argmax())], []
    for _ in range(steps - 1):
        logits, *cache = run(Tensor.from_dlpack(np.array([[ids[-1]]], np.int64)), *cache)
        decoded.append(np.from_dlpack(logits)[0].astype(np.float64))
        ids.append(int(decoded[-1].argmax()))
    return ids, decoded


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
    from checker.diagnosis.compiled import load_gpt2

    return load_gpt2(eleven.GPT2LMHeadModel, eleven.load_hf_weights, checkpoint)


def _hf(checkpoint: Checkpoint):
    from checker.references.reference import load_hf_model

    return load_hf_model(checkpoint)


FLOAT32 = KernelDecode("GPT2WithKernel", "KernelLinear", "matvec", "gpt2_matvec", _product, _load, _hf,
                       lambda step, model: kernel_linear_problem(step.KernelLinear, model))


def decode_part(run: StepRun, step, used, checkpoint: Checkpoint, spec: KernelDecode = FLOAT32):
    """Returns (step 13's graph, the prefill-then-decode run, the learner's empty_cache) when it passes.

    The decode steps run op by op first (seconds: MAX's ops are compiled already, by the earlier steps): a
    wrong decode is answered without compiling. Only a decode right op by op is compiled, as `pixi run gpt2`
    runs it, and checked again (a fault only compilation shows)."""
    from checker.diagnosis.compiled import compile_with_cache

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
        eager = prefill_then_decode(prefill, run.call(build, model))
        with counting_kernel_calls() as calls:
            ids, decoded = run.call(greedy_steps, eager, config, thirteen.empty_cache, prompt, EAGER_TOKENS)
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

    def logits(self, ids: list[int]) -> np.ndarray:
        """[len(ids) - 1, V]: Hugging Face's logits at each decode step of the prompt followed by `ids`."""
        import torch

        n = len(self.prompt)
        with torch.no_grad():
            return self.hf(torch.tensor([self.prompt + ids])).logits[0, n:n + len(ids) - 1].double().numpy()

    def verdict(self, ids: list[int], decoded: list[np.ndarray]):
        return compare(np.stack(decoded), self.logits(ids), axes=("decode step", "vocab"), mistakes=[], tol=DECODE)

    def problems(self, ids: list[int], decoded: list[np.ndarray]):
        """None when the decode is right; else (the logits' verdict, the lines that say what differs)."""
        verdict = self.verdict(ids, decoded)
        if verdict.ok and ids == self.theirs[:len(ids)]:
            return None
        problems = []
        if ids != self.theirs[:len(ids)]:
            i = next(i for i, (a, b) in enumerate(zip(ids, self.theirs)) if a != b)
            problems.append(f"greedy ids differ from transformers' from new token {i}: yours {ids[i:i + 4]}, "
                            f"transformers' {self.theirs[i:i + 4]}")
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
        with max_products(spec.op, spec.product):
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
    return (f"{instead}, your decode is still off ({reference.verdict(ids, decoded).summary}): the cause is outside "
            f"the kernel: in what {spec.model} and {spec.linear} hand {spec.function} (which weights and bias, the "
            f"reshapes around it, the head's weight: wte, tied) or in the decode step around it ({spec.model}.forward "
            "and what it calls: its blocks, layer norms and attention, step 13's or your own)")


def decode_rates(runs: dict, config, empty_cache, *, prompt_length: int = 32, steps: int = 48,
                 rounds: int = 2) -> tuple[dict[str, float], list[str]]:
    """Decode tokens/s of each run (name -> callable), interleaved, the best of `rounds` kept; and a line
    for the report when other programs shared the CPU meanwhile (checker.references.bandwidth.busy_note).
    Each run waits until the threads of the one before are quiet (bandwidth.settled)."""
    from checker.diagnosis.compiled import greedy_with_cache
    from checker.references.bandwidth import busy_note, others_busy, settled

    prompt = np.random.default_rng(0).integers(0, min(config.vocab_size, 400), (1, prompt_length))
    rates: dict[str, list[float]] = {name: [] for name in runs}
    with others_busy() as busy:
        for _ in range(rounds):
            for name, run in runs.items():
                settled()
                _, seconds = greedy_with_cache(run, empty_cache(config, 1), prompt, steps)
                rates[name].append(steps / seconds)
    return {name: max(r) for name, r in rates.items()}, busy_note(busy)


def timing_part(prefill, both, empty_cache, config) -> Part:
    """A report of speed: never fails (timings vary with the machine and its load)."""
    from checker.references.bandwidth import read_bandwidth, weight_bytes_per_token

    rates, busy = decode_rates({"MAX's products (your step 13)": prefill, "your kernel": both}, config, empty_cache)
    per_token = weight_bytes_per_token(config)
    limit = read_bandwidth()
    lines = [f"{name}: {rate:.1f} tokens/s, reading the weights at {rate * per_token / 1e9:.1f} GB/s "
             f"({rate * per_token / limit:.0%} of the {limit / 1e9:.1f} GB/s this machine reads now)"
             for name, rate in rates.items()] + busy
    mine, theirs = rates["your kernel"], rates["MAX's products (your step 13)"]
    return Part("timing", PASS, f"a report, not a verdict: decode {mine / theirs:.2f}x as fast with your kernel "
                f"({mine:.1f} against {theirs:.1f} tokens/s; {per_token / 1e6:.0f} MB of weights per token)", lines)


register(Step("15", check, CATALOGUE))
