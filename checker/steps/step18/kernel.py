"""Step 18's kernel parts: the learner's two ops in a child process, five runs each, against numpy in float64.

    attention_part   paged_flash_attention on kernel_cases (a graph built around each case's own pool:
                     checker.running.paged_graph): the output of every row, and the pool it leaves (the new rows'
                     keys and values at their positions, nothing else touched)
    products_part    matmul_q8 on product_cases: x [M, K] @ dequantize(q, scales).T + b; off outputs read by what
                     they share, and the x they multiplied solved from them (checker.steps.step18.solved)

A mistake is named when what it computes equals the learner's output and pool on every case; otherwise the
failing cases are read by what they share (checker.steps.step18.reading).
"""

from __future__ import annotations

import sys
from itertools import pairwise
from pathlib import Path

import numpy as np

from checker.diagnosis.crashes import crash_part
from checker.diagnosis.reading import Above, Rows, Rule, read
from checker.harness.runner import StepRun
from checker.reporting.compare import compare, differs, ranges
from checker.reporting.report import FAIL, PASS, Part
from checker.running.mojo import REPEATS, Crashed, run_kernel
from checker.steps.step18.mistakes import CATALOGUE
from checker.steps.step18.reading import AXES, pool_problems, readings
from checker.steps.step18.reference import (
    KERNEL,
    PRODUCT,
    ROUNDINGS,
    case_arrays,
    expected,
    kernel_cases,
    product_cases,
    rounded_product,
)
from checker.steps.step18.solved import solved_x
from runtime.learner import LearnerError
from runtime.quantize import dequantize, quantize

SEED = 18
INDICES = ("q, k, v and the output [T, H, D] below T * H * D, request b's rows from input_row_offsets[b] up to "
           "input_row_offsets[b + 1] (a band of them not past its request's last); the pool blocks [pages, 2, L, "
           "PAGE, H, D], position p of request b in page lookup_table[b, p / PAGE] (below pages), slot p % PAGE; "
           "lookup_table [B, max_pages]; input_row_offsets [B + 1]")
WORDS = {"B": "B, the requests of the batch", "T": "T, the batch's new rows", "rows": "a request's new rows",
         "cached": "a request's cached positions", "page": "PAGE, the positions a page holds", "H": "H, the heads"}
PRODUCT_WORDS = {"M": "M, the rows of x", "K": "K, the columns of x and q", "N": "N, the rows of q (y's columns)"}
PRODUCT_INDICES = "rows of q below N, columns below K, scales' index below N * KB (KB = ceil(K / 32)), y's below M * N"


def arrays() -> dict[str, list[np.ndarray]]:
    return {case.name: case_arrays(case, SEED) for case in kernel_cases()}


def attention_part(run: StepRun, path: Path) -> Part:
    print("(building your Mojo kernels and running them in a separate process: about a minute after a change on 2 "
          "cores, seconds when unchanged)", file=sys.stderr, flush=True)
    inputs = arrays()
    about = {case.name: f"{case.name} (rows {list(case.new)}, cached {list(case.cached)}, pages of {case.page})"
             for case in kernel_cases()}
    try:
        results = run_kernel(path, "paged_flash_attention", inputs, timeout=max(run.timeout, 300), writes=(3,),
                             indices=INDICES, about=about, compiled=True)
    except Crashed as e:
        features = {case.name: dict(B=len(case.new), T=sum(case.new), rows=max(case.new), cached=max(case.cached),
                                    page=case.page, H=case.heads) for case in kernel_cases()}
        ran = [case for case in kernel_cases() if case.name in e.results]
        return run.add(crash_part("attention", e, features, WORDS, judge(inputs, e.results, ran) if ran else None,
                                  "batches"))
    except LearnerError as e:
        return run.add(Part.from_error("attention", e))
    return run.add(judge(inputs, results))


def judge(inputs: dict[str, list[np.ndarray]], results: dict[str, np.ndarray], cases: list | None = None) -> Part:
    """The attention part of `results` ({name: [R, T, H, D]}, {name#3: the pool after each run}) on `cases` (every
    kernel case, or those a crashing kernel ran)."""
    cases = kernel_cases() if cases is None else cases
    names = [case.name for case in cases]
    wants = {name: expected(*inputs[name]) for name in names}
    raced = [name for name in names if _varies(results[name]).any() or _varies(results[f"{name}#3"]).any()]
    if raced:
        summary = f"the same input gave different outputs in {REPEATS} runs on {'; '.join(raced)}"
        race = ("two tasks write the same place at once (a row's output, a split's (m, l, acc), a slot of the pool), "
                "or a task reads a key another has not stored yet: store every new key and value first, in a pass of "
                "their own, then attend; give each task its own outputs. Or no task writes those outputs at all (a "
                "task, band or head left out: their memory holds whatever was there)")
        where = [f"  {case.name}: {_race_where(case, results[case.name], results[f'{case.name}#3'])}"
                 for case in cases if case.name in raced][:3]
        if all(_never_right(results[name], wants[name][0]) and not _varies(results[f"{name}#3"]).any()
               for name in raced):  # memory no task writes (the pool, written before, the same every run)
            return Part("attention", FAIL, summary, [UNWRITTEN, "what changes from run to run:", *where])
        if _steady_share(results, names) >= 0.5 and (named := _named(inputs, results, wants, steady=True)) is not None:
            # a mistake that explains every value the same in every run: its stores collide where it races
            return Part("attention", FAIL, summary, [f"where it races: {race}", *where], named)  # named once
        return Part("attention", FAIL, summary, [race, "what changes from run to run:", *where])
    pools = {name: pool_problems(inputs[name], results[f"{name}#3"][0], wants[name][1]) for name in names}
    verdicts = {name: compare(results[name][0].astype(np.float64), wants[name][0], axes=AXES, mistakes=[], tol=KERNEL)
                for name in names}
    failing = [name for name in names if not verdicts[name].ok or pools[name]]
    if not failing:
        worst = max(v.margin or 0.0 for v in verdicts.values())
        return Part("attention", PASS, f"{len(names)} ragged paged batches, {REPEATS} runs each, the same every run, "
                    f"the pool written at the new positions and nowhere else; worst {worst:.2f} of allowed ({KERNEL})",
                    margin=worst)
    right_on = f"right on: {'; '.join(n for n in names if n not in failing) or 'none'}"
    if (named := _named(inputs, results, wants)) is not None:
        return Part("attention", FAIL, f"off on {len(failing)} of {len(names)} cases",
                    [f"off on: {'; '.join(failing)}", right_on], named,
                    verdicts[failing[0]].margin)  # the mistake told once, as the likely one
    first = failing[0]
    details = [f"{first}: {line}" for line in pools[first]]
    if not any(pools.values()):
        details += readings(inputs, results, {name: wants[name] for name in names})
    details.append(right_on)
    if verdicts[first].ok is False:
        details += [f"{first}: {verdicts[first].summary}", *(f"  {d}" for d in verdicts[first].details)]
    if len(failing) > 1:
        details.append(f"also off: {'; '.join(failing[1:])}")
    return Part("attention", FAIL, f"off on {len(failing)} of {len(names)} cases", details, None,
                verdicts[first].margin)


UNWRITTEN = ("the output rows that change from run to run are right in no run: no task writes them, it seems (a "
             "task, band, head or request left out: their memory holds whatever was there, another thing each run), "
             "not two tasks writing one place, which some run would get right: which rows each task is given (a "
             "request's first and last row, its bands)")


def _never_right(outputs: np.ndarray, want: np.ndarray) -> bool:
    """outputs [R, T, H, D] of REPEATS runs: whether every (row, head) that changes from run to run is right in no
    run (and some does change)."""
    varies = _varies(outputs).any(axis=-1)  # [T, H]
    with np.errstate(invalid="ignore"):
        right = (np.abs(outputs - want) <= KERNEL.allowed(want)).all(axis=-1).any(axis=0)  # [T, H]: in some run
    return bool(varies.any() and not (varies & right).any())


def _race_where(case, outputs: np.ndarray, pools: np.ndarray) -> str:
    """outputs [R, T, H, D] and pools [R, pages, 2, L, PAGE, H, D] of REPEATS runs of one case -> which rows (of
    which requests) and heads of the output, and which slots of the pool, are not the same in every run."""
    out = _varies(outputs).any(axis=-1)  # [T, H]
    pool = _varies(pools).any(axis=-1)  # [pages, 2, L, PAGE, H]
    said = []
    if out.any():
        rows, heads = np.flatnonzero(out.any(axis=1)), np.flatnonzero(out.any(axis=0))
        requests = np.searchsorted(np.cumsum(case.new), rows, side="right")
        said.append(f"output rows {ranges(rows)} (of {out.shape[0]}; request{'s' if len(set(requests)) > 1 else ''} "
                    f"{ranges(set(requests))}), heads {ranges(heads)}")
    if pool.any():
        slots = pool.any(axis=(1, 2, 4))  # [pages, PAGE]: a position of a page, keys or values, any layer or head
        said.append(f"{int(slots.sum())} positions of the pool, in pages {ranges(np.flatnonzero(slots.any(axis=1)))}")
    return "; ".join(said) or "nothing"


def _named(inputs: dict, results: dict, wants: dict, steady: bool = False):
    """The catalogued mistake whose output and pool equal the learner's on every case, or None. With `steady`,
    only the values that are the same in every run are compared (a mistake whose stores collide races on the
    others), and they must show the mistake: somewhere they differ from the right kernel's."""
    names = list(wants)
    for mistake in CATALOGUE:
        seen = [_seen(mistake, inputs[name], results[name], results[f"{name}#3"], wants[name], steady)
                for name in names]
        if all(agrees for agrees, _ in seen) and any(shows for _, shows in seen):
            return mistake
    return None


def _seen(mistake, arrays: list, outputs: np.ndarray, pools: np.ndarray, want: tuple,
          steady: bool) -> tuple[bool, bool]:
    """One case's REPEATS outputs and pools against what `mistake` computes -> (they agree, the values compared
    differ from the right kernel's, `want` (output, pool), somewhere). With `steady`, a value that changes from
    run to run is not compared."""
    out, pool = mistake.compute(*arrays)
    held = ~_varies(outputs) if steady else np.ones(outputs.shape[1:], bool)
    kept = ~_varies(pools) if steady else np.ones(pools.shape[1:], bool)
    got, left = np.where(held, outputs[0], out), np.where(kept, pools[0], pool)
    agrees = np.array_equal(left, pool, equal_nan=True) and compare(
        got.astype(np.float64), np.asarray(out, np.float64), axes=AXES, mistakes=[], tol=KERNEL).ok
    if not steady:
        return agrees, True
    right, right_pool = want
    shows = bool((held & ~np.isclose(out, right, rtol=1e-3, atol=1e-4, equal_nan=True)).any()
                 or (kept & differs(pool, right_pool)).any())
    return agrees, shows


def _steady_share(results: dict, names: list[str]) -> float:
    """The share of all cases' output values that are the same in every run."""
    return sum(int((~_varies(results[n])).sum()) for n in names) / sum(results[n][0].size for n in names)


def product_arrays() -> dict[str, list[np.ndarray]]:
    """Each product case's x [M, K], q [N, K] int8, scales [N, KB], b [N]."""
    out = {}
    for name, M, K, N in product_cases():
        rng = np.random.default_rng([SEED, M, K, N])
        q, scales = quantize(rng.standard_normal((N, K), dtype=np.float32))
        out[name] = [rng.standard_normal((M, K), dtype=np.float32), q, scales, rng.standard_normal(N, dtype=np.float32)]
    return out


PRODUCT_RULES = [
    Rule(lambda f: f["m"] >= 4 * (f["M"] // 4), "off exactly on the last M % 4 rows of x: the rows left after the "
         "last whole group of rows (a kernel that takes rows of x in groups)"),
    *(Rule(lambda f, g=g: f["n"] >= g * (f["N"] // g), f"{said} N % g outputs of each row, g = {{alike}}: the "
           "rows of q left after the last whole group of g (a kernel that takes rows of q in groups)", within=within,
           family="groups of q", value=g)
      for within, said in ((False, "off exactly on the last"), (True, "off only among the last"))
      for g in (4, 8, 16, 32, 64)),
    Rule(lambda f: f["M"] > 1, "off exactly on the products of more than one row of x, M = 1 right: which row of x "
         "an output reads (x[m, k] at m * K + k) and where it is written (y[m, n] at m * N + n)"),
    *(Rule(lambda f: f["K"] % 32 != 0, f"{said}: the last block's K % 32 columns (its largest |x|, its own scale, "
           "the columns past K)", within=within)
      for within, said in ((False, "off exactly where K is no multiple of 32"),
                           (True, "right on every product whose K is a multiple of 32; off only among those whose K "
                                  "is not"))),
    Rule(lambda f: f["m"] > 0, "off exactly on every row of x but the first: x's row m starts at m * K"),
    Above("m", "off exactly on the rows of x after row {k} of each product, rows 0 .. {k} right: a later group of "
          "rows of x (where it starts, what it adds once per output: the bias)",
          within="rows 0 .. {k} of x right in every product; off only among the rows after them ({off} of their "
                 "{above} outputs): a later group of rows of x (where it starts, what it adds once per output: the "
                 "bias), or what your kernel does only for some numbers of rows", least=1),
    Above("M", "off exactly on the products of more than {k} rows of x, right on every product of {k} or fewer: "
          "what your kernel does only from some number of rows on, {k} + 1 to {first} (a way through the weights "
          "of its own, a later group of rows of x)",
          within="right on every product of {below} rows of x or fewer; off only among products of {first} or more "
          "({off} of their {above} outputs): what your kernel does only from some number of rows on, {below} + 1 "
          "to {first} (a way through the weights of its own, a later group of rows of x)"),
    *(Rule(lambda f, k=k: f["M"] < k, f"off {said} the products of {below} rows of x or fewer, every product of "
           f"{k} or more right: what your kernel does only for few rows, up to some number from {below} to {k} - 1 "
           "(its way through the weights for them, as at decode: a row of q streamed once for each group of rows "
           "of x)", within=within)
      for within, said in ((False, "exactly on"), (True, "only among"))
      for below, k in pairwise(sorted({M for _, M, _, _ in product_cases()}))),
]


def products_part(run: StepRun, path: Path) -> str | None:
    """Runs and judges the products; returns how they round x and w (a key of ROUNDINGS; None: not at all)."""
    inputs = product_arrays()
    about = {name: f"{name} (x [{M}, {K}], q [{N}, {K}])" for name, M, K, N in product_cases()}
    try:
        results = run_kernel(path, "matmul_q8", inputs, timeout=max(run.timeout, 300), indices=PRODUCT_INDICES,
                             about=about)
    except Crashed as e:
        ran = [case for case in product_cases() if case[0] in e.results]
        run.add(crash_part("products", e, {name: dict(M=M, K=K, N=N) for name, M, K, N in product_cases()},
                           PRODUCT_WORDS, judge_products(inputs, e.results, ran)[0] if ran else None, "products"))
        return None
    except LearnerError as e:
        if any(p.name == "attention" and p.summary == str(e) for p in run.report.parts):  # one package, one error
            run.add(Part("products", FAIL, "stopped by the same error as attention, above: both ops are built from "
                         "one Mojo package (the kernel folder beside your step file), so it is said once"))
        else:
            run.add(Part.from_error("products", e))
        return None
    part, rounding = judge_products(inputs, results)
    run.add(part)
    return rounding


def judge_products(inputs: dict[str, list[np.ndarray]], results: dict[str, np.ndarray],
                   cases: list | None = None) -> tuple[Part, str | None]:
    """The products' Part on `cases` (every product case, or those a crashing kernel ran), and the one way every
    case rounds x and w (a key of ROUNDINGS; None: not at all)."""
    cases = product_cases() if cases is None else cases
    names = [name for name, *_ in cases]
    wants = {name: _product(*inputs[name]) for name in names}
    raced = [name for name in names if _varies(results[name]).any()]
    rows = _rows(results, wants)
    if raced:
        changes = {name: _varies(results[name]) for name in names}
        # outputs off the same way in every run are off too: what changes is not all that is wrong
        steady = {name: _off_every_rounding(results[name][0], *inputs[name]) & ~changes[name] for name in names}
        wrong = np.concatenate([(changes[name] | steady[name]).reshape(-1) for name in names])
        where = read(rows, wrong, PRODUCT_RULES)
        wrong_steady = sum(int(steady[name].sum()) for name in names)
        counted = (f"{int(wrong.sum())} outputs off, {wrong_steady} of them the same every run and the others "
                   "changing from run to run" if wrong_steady else f"{int(wrong.sum())} outputs change from run to run")
        return Part("products", FAIL, f"the same input gave different outputs in {REPEATS} runs on {'; '.join(raced)}",
                    [counted + (f", {where.replace('off exactly on', 'exactly')}" if where else ""),
                     *(f"  {name}: {_which(changes[name] | steady[name])}"
                       for name, M, K, N in cases if (changes[name] | steady[name]).any()),
                     "an output no task writes keeps whatever the memory held (a row or column a loop leaves out), "
                     "or two tasks write (or add into) it at once: every y[m, n] written once, by one task"]), None
    verdicts = {name: _verdict(results[name], wants[name]) for name in names}
    failing = [name for name in names if not verdicts[name].ok]
    said = f"{len(names)} products, M = {', '.join(str(M) for _, M, *_ in cases)} rows, {REPEATS} runs each"
    if not failing:
        worst = max(v.margin or 0.0 for v in verdicts.values())
        return Part("products", PASS, f"{said}; worst {worst:.2f} of allowed ({PRODUCT})", margin=worst), None
    rounded = {}
    order = sorted(failing, key=lambda n: inputs[n][0].size * len(inputs[n][1]))  # the smallest first
    for name in order:
        if (rounding := _rounded_as(results[name][0], *inputs[name])) is None:
            break  # a mistake, not a rounding: as cheap as one small case
        rounded[name] = rounding
    else:  # each off product is a rounded one
        ways = sorted(set(rounded.values()))
        if len(ways) == 1 and len(failing) == len(names):
            worst = max(_margin(results[name][0], ways[0], *inputs[name]) for name in names)
            return Part("products", PASS, f"{said}, each equal to the product with {ways[0]}: worst {worst:.2f} "
                        f"of allowed ({PRODUCT})", [
                            "your kernel rounds what it multiplies: the model's wiring is checked on float32 "
                            "products in its place, and the server is held to transformers whose every product rounds "
                            "the same way, within what float32's noise alone moves that reference (a rounded x is a "
                            "step function of x: the book's step 18 says what it costs)",
                            f"every case took a path that rounds ({ways[0]}): a path of your kernel that multiplies "
                            "otherwise (float32, for a CPU without the instructions the rounding one uses) ran on "
                            "none of them and is not checked on this CPU"], margin=worst), ways[0]
        return Part("products", FAIL, f"off on {len(failing)} of {len(names)} products, each equal (to float32's "
                    f"noise) to the product with {' or '.join(ways)}", [
                        *(f"  {name}: {rounded.get(name, 'nothing rounded')}" for name in names),
                        "the server is held to transformers rounding every product one way: round x "
                        "and w the same way for every M and K (one rounding, or none, in every path of the kernel)"],
                    None, verdicts[failing[0]].margin), None
    if not rounded:  # the smallest is a mistake; a larger one may round, the mistake in a path it does not take
        rounded = next(({name: way} for name in order[1:]
                        if (way := _rounded_as(results[name][0], *inputs[name])) is not None), {})
    held = ""
    if len(ways := set(rounded.values())) == 1:  # the smallest off products round one way: the rest are read
        way = ways.pop()  # against that rounding, a product off from it being the mistake
        plain = [name for name in names if name not in failing]  # right without rounding
        for name in failing:
            x, q, scales, b = inputs[name]
            wants[name] = rounded_product(way, x, dequantize(q, scales), b)
            verdicts[name] = _verdict(results[name], wants[name])
        rows, failing = _rows(results, wants), [name for name in failing if not verdicts[name].ok]
        held = f", the others equal (to float32's noise) to the product with {way}" + (
            f" or, {'; '.join(plain)}, to float32's" if plain else "")
    first = verdicts[failing[0]]
    details = [line for line in (read(rows, rows.off, PRODUCT_RULES), solved_x(inputs, results, failing)) if line]
    details = details or [line for line in [_own_rounding(inputs, results, failing)] if line]
    details += [f"{failing[0]}: {first.summary}", *(f"  {d}" for d in first.details),
                f"right on: {'; '.join(n for n in names if n not in failing) or 'none'}"]
    if len(failing) > 1:
        details.append(f"also off: {'; '.join(failing[1:])}")
    return Part("products", FAIL, f"off on {len(failing)} of {len(names)} products{held}", details, None,
                first.margin), None


def _own_rounding(inputs: dict, results: dict, failing: list[str]) -> str | None:
    """When every product is off by about what rounding x to int8 per block moves it (a quarter to five times,
    root mean square, on the smallest), a rounding of x of the kernel's own: said, or None."""
    if len(failing) < len(inputs):
        return None
    name = min(failing, key=lambda n: inputs[n][0].size * len(inputs[n][1]))
    x, q, scales, b = inputs[name]
    exact = _product(x, q, scales, b)
    q8 = rounded_product("x in int8 per block of 32", x, dequantize(q, scales), b)
    ratio = np.sqrt(np.mean((results[name][0] - exact) ** 2) / np.mean((q8 - exact) ** 2))
    if not 1 / 4 < ratio < 5:
        return None
    return (f"every product off, by about what rounding x to int8 per block of 32 moves it ({ratio:.1f}x that, "
            f"on {name}), and equal to no rounding the check knows: a rounding of x of your own: Q8_0's is per "
            "block of 32, the scale max|x| / 127, x / scale rounded to the nearest (ties to even), never cut")


def _verdict(runs: np.ndarray, want: np.ndarray):
    """The first run's output [M, N] against `want`, by row of x and output."""
    return compare(runs[0].astype(np.float64), want, axes=("row of x", "output"), mistakes=[], tol=PRODUCT)


def _rows(results: dict[str, np.ndarray], wants: dict[str, np.ndarray]) -> Rows:
    """Every product's outputs as rows of one value, with the features PRODUCT_RULES read."""
    return Rows.of([(name, results[name][0].reshape(-1, 1), wants[name].reshape(-1, 1),
                     {"m": np.repeat(np.arange(M), N), "n": np.tile(np.arange(N), M), "M": M, "N": N, "K": K})
                    for name, M, K, N in product_cases() if name in wants], PRODUCT)


def _off_every_rounding(got: np.ndarray, x: np.ndarray, q: np.ndarray, scales: np.ndarray, b: np.ndarray
                        ) -> np.ndarray:
    """[M, N]: the outputs off the product under the way of rounding (none, or one of ROUNDINGS) they fit best."""
    got, w = got.astype(np.float64), dequantize(q, scales)
    wants = [x.astype(np.float64) @ w.astype(np.float64).T + b, *(rounded_product(r, x, w, b) for r in ROUNDINGS)]
    with np.errstate(invalid="ignore"):
        return min((~(np.abs(got - want) <= PRODUCT.allowed(want)) for want in wants), key=lambda off: int(off.sum()))


def _margin(got: np.ndarray, rounding: str, x: np.ndarray, q: np.ndarray, scales: np.ndarray, b: np.ndarray) -> float:
    """max |got - the rounded product| / PRODUCT's allowed."""
    return compare(got.astype(np.float64), rounded_product(rounding, x, dequantize(q, scales), b), axes=("", ""),
                   mistakes=[], tol=PRODUCT).margin or 0.0


def _rounded_as(got: np.ndarray, x: np.ndarray, q: np.ndarray, scales: np.ndarray, b: np.ndarray) -> str | None:
    """The rounding of ROUNDINGS whose product equals `got` within PRODUCT, or None."""
    got, w = got.astype(np.float64), dequantize(q, scales)
    return next((rounding for rounding in ROUNDINGS if compare(got, rounded_product(rounding, x, w, b), axes=("", ""),
                                                               mistakes=[], tol=PRODUCT).ok), None)


def _varies(runs: np.ndarray) -> np.ndarray:
    """runs [REPEATS, ...] -> [...]: where the runs do not all hold the same value (NaN equal to NaN)."""
    return differs(runs, runs[0]).any(axis=0)


def _which(mask: np.ndarray) -> str:
    """mask [M, N] -> 'rows of x 12 (of 13), every output' : the rows and outputs it holds."""
    rows, outputs = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    M, N = mask.shape
    said_rows = "every row of x" if len(rows) == M else f"rows of x {ranges(rows)} (of {M})"
    said_outputs = "every output" if len(outputs) == N else f"outputs {ranges(outputs)} (of {N})"
    return f"{said_rows}, {said_outputs}"


def _product(x, q, scales, b) -> np.ndarray:
    return x.astype(np.float64) @ dequantize(q, scales).astype(np.float64).T + b
