"""Step 17's kernel part: the learner's flash_attention (their Mojo) in a child process on kernel_cases, three
runs each, against numpy in float64: its output, and the caches it leaves (the new keys and values at
P .. P+T-1, every other position untouched). A mistake is named when what it computes equals the learner's
output and caches on every case; otherwise the failing cases are described by what they share.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from checker.harness.runner import StepRun
from checker.reporting.compare import compare
from checker.reporting.report import FAIL, PASS, Part
from checker.running.mojo import REPEATS, run_kernel
from checker.steps.step17.mistakes import BY_CACHES, CATALOGUE, cuts, output
from checker.steps.step17.reference import KERNEL, attention, case_arrays, expected, kernel_cases
from runtime.learner import LearnerError

SEED = 17
AXES = ("sequence", "head", "query", "")
INDICES = ("q, k, v [B, H, T, D] below (B * H * T) * D; the caches [B, H, N, D] below B * H * N * D, a head's "
           "key j at ((b * H + h) * N + j) * D, and P + T at most N")


FLOAT16_CACHES = ("your empty_flash_cache makes float16 caches, and MAX could not build the op for them: declare the "
                  "kernel's caches so they take either dtype, k_cache: InputTensor[rank=4, ...] and v_cache: "
                  "InputTensor[dtype=k_cache.dtype, rank=4, ...] (store with .cast[k_cache.dtype](), read back with "
                  ".cast[DType.float32]()), or make float32 caches")


def arrays(dtype: np.dtype = np.dtype(np.float32)) -> dict[str, list[np.ndarray]]:
    """Each case's inputs: q, k, v, k_cache, v_cache (of `dtype`: the learner's caches'), past."""
    return {case[0]: case_arrays(case, SEED, dtype) for case in kernel_cases()}


def _cache_problem(name: str, got: np.ndarray, want: np.ndarray, before: np.ndarray, P: int, T: int,
                   what: str) -> str | None:
    """What is wrong with the cache `what` the kernel left ([B, H, N, D]), or None."""
    if np.array_equal(got, want):
        return None
    rows = np.flatnonzero(np.any(got != want, axis=(0, 1, 3)))
    new = set(range(P, P + T))
    if np.array_equal(got, before):
        return f"{what} is as it was before the call on {name}: the new positions {P} .. {P + T - 1} were not written"
    listed = ", ".join(map(str, rows[:8])) + (", ..." if len(rows) > 8 else "")
    if not new & set(rows.tolist()):
        return (f"{what} differs at positions {listed} on {name}, though its new positions {P} .. {P + T - 1} are "
                "right: a write outside them (over the cached positions, or past them)")
    return f"{what} differs at positions {listed} on {name} (the new ones are {P} .. {P + T - 1})"


def kernel_part(run: StepRun, path: Path, dtype: np.dtype = np.dtype(np.float32)) -> Part:
    """The kernel part: the learner's kernel run on caches of `dtype` (their empty_flash_cache's), then judged."""
    print("(building your Mojo kernel and running it in a separate process: about a minute after a change to "
          "flash.mojo on 2 cores, seconds when unchanged)", file=sys.stderr, flush=True)
    inputs = arrays(dtype)
    about = {name: f"{name} (q [{B}, {H}, {T}, {D}], caches {dtype} [{B}, {H}, {N}, {D}], past {P})"
             for name, B, H, T, P, D, N, _ in kernel_cases()}
    try:
        results = run_kernel(path, "flash_attention", inputs, timeout=max(run.timeout, 300), writes=(3, 4),
                             indices=INDICES, about=about)
    except LearnerError as e:
        part = Part.from_error("kernel", e)
        if dtype == np.float16 and "Failed to compile" in str(e):
            part.details.append(FLOAT16_CACHES)
        return run.add(part)
    return run.add(judge(inputs, results))


def judge(inputs: dict[str, list[np.ndarray]], results: dict[str, np.ndarray]) -> Part:
    """The kernel part of `results` ({name: [R, B, H, T, D]}, {name#3, name#4: the caches after each run})."""
    cases = kernel_cases()
    raced = [name for name, *_ in cases
             if any(not np.array_equal(r, results[key][0], equal_nan=True)
                    for key in (name, f"{name}#3", f"{name}#4") for r in results[key][1:])]
    wants = {name: expected(*inputs[name]) for name, *_ in cases}  # each case's (output, k_cache, v_cache)
    caches = {name: _caches(name, inputs[name], wants[name], results) for name, *_ in cases}
    if raced:
        both = ("two tasks write (or add into) the same place at once: the output of one (b, h, query), a part's "
                "(m, l, acc), a position of the cache; give each task its own, and combine after the tasks end")
        early = ("a task reads keys or values another task has not stored yet: a query band reads the new keys of "
                 "the bands before it; store every new key and value first, in a pass of their own, then attend")
        prefill_only = all(T > 1 for name, B, H, T, *_ in cases if name in raced)
        lines = [f"only where T > 1 (a prefill): {early}", f"or {both}"] if prefill_only else [both, f"or {early}"]
        if misplaced := [problem for name in raced for problem in caches[name]]:  # the writes do not race
            lines = [*misplaced[:2], "a task then reads a position of the cache while another writes it: write the "
                     "new keys and values at P .. P+T-1 and nowhere else", *lines[1:]]
        return Part("kernel", FAIL, f"the same input gave different outputs in {REPEATS} runs on {'; '.join(raced)}",
                    lines)
    verdicts = {name: compare(results[name][0].astype(np.float64), wants[name][0], axes=AXES, mistakes=[],
                              tol=KERNEL) for name, *_ in cases}
    failing = [name for name, *_ in cases if not verdicts[name].ok or caches[name]]
    if not failing:
        worst = max(v.margin or 0.0 for v in verdicts.values())
        return Part("kernel", PASS, f"{len(cases)} cases, {REPEATS} runs each, the same every run, the caches "
                    f"written at P .. P+T-1 and nowhere else; worst {worst:.2f} of allowed ({KERNEL})", margin=worst)
    named = _named(inputs, results)
    first = failing[0]
    verdict = verdicts[first]
    details = [f"right on: {'; '.join(n for n, *_ in cases if n not in failing) or 'none'}",
               *(caches[first] or [f"{first}: {verdict.summary}", *(f"  {d}" for d in verdict.details)])]
    if len(failing) > 1:
        details.append(f"also off: {'; '.join(failing[1:])}")
    if named is None:
        details += _shared(cases, failing, inputs, results, caches, wants)
    return Part("kernel", FAIL, f"off on {len(failing)} of {len(cases)} cases", details, named, verdict.margin)


def _caches(name: str, arrays: list[np.ndarray], want: tuple, results: dict) -> list[str]:
    """What is wrong with the two caches the kernel left on case `name` (its first run), against `want`
    (expected's): [] when both are right."""
    q, k, v, k_cache, v_cache, past = arrays
    P, T = int(past[0]), q.shape[2]
    _, kc, vc = want
    return [problem for i, (after, before, label) in enumerate(((kc, k_cache, "k_cache"), (vc, v_cache, "v_cache")))
            if (problem := _cache_problem(name, results[f"{name}#{i + 3}"][0], after, before, P, T, label))]


def _matches(got: np.ndarray, kc: np.ndarray, vc: np.ndarray, out, caches_only: bool) -> bool:
    """The learner's caches equal what a mistake leaves, and (unless `caches_only`) their output what it
    computes (its NaN where it has NaN)."""
    output, want_k, want_v = out
    return np.array_equal(kc, want_k) and np.array_equal(vc, want_v) and (caches_only or compare(
        got.astype(np.float64), np.asarray(output, np.float64), axes=AXES, mistakes=[], tol=KERNEL).ok)


def _named(inputs: dict, results: dict):
    """The catalogued mistake whose output and caches equal the learner's on every case, cut the same way
    on each (one tile size, one split count), or None."""
    names = [name for name, *_ in kernel_cases()]
    for mistake in CATALOGUE:
        for tile, splits in cuts(mistake):
            if all(_matches(results[name][0], results[f"{name}#3"][0], results[f"{name}#4"][0],
                            output(mistake, inputs[name], tile, splits), mistake in BY_CACHES) for name in names):
                return mistake
    return None


def _scale_fit(inputs: dict, results: dict, wants: dict) -> float | None:
    """The factor c for which causal attention with scores q . k x c is the learner's output on every case (its
    caches right: the caller's to know), or None: c fitted on the first case, then held to every case at the
    check's tolerance."""
    names = [name for name, *_ in kernel_cases()]
    first = inputs[names[0]]
    got = results[names[0]][0].astype(np.float64)
    if not np.isfinite(got).all():
        return None
    _, kc, vc = wants[names[0]]
    P = int(first[5][0])

    def error(c: float) -> float:
        return float(np.abs(attention(first[0], kc, vc, P, scale=c) - got).max())

    grid = np.float64(2.0) ** np.linspace(-12, 6, 361)  # 2^-12 .. 2^6, 5% apart
    best = int(np.argmin([error(c) for c in grid]))
    low, high = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
    for _ in range(40):  # golden-section search between the grid's neighbours
        a, b = high - (high - low) / 1.618, low + (high - low) / 1.618
        low, high = (low, b) if error(a) < error(b) else (a, high)
    c = (low + high) / 2
    for name in names:
        _, kc, vc = wants[name]
        if not compare(results[name][0].astype(np.float64), attention(inputs[name][0], kc, vc,
                                                                       int(inputs[name][5][0]), scale=c),
                       axes=AXES, mistakes=[], tol=KERNEL).ok:
            return None
    return c


def _scaled(c: float, Dh: int) -> str:
    """What a fitted scale says: c against GPT-2's 1 / sqrt(D), and as a power of sqrt(D) when it is one."""
    power = -np.log(c) / np.log(np.sqrt(Dh))  # c = sqrt(D)^-power
    reading = ""
    if abs(power - round(power)) < 0.01 and round(power) != 1:
        reading = f" = q . k / sqrt(D)^{round(power)}" if round(power) else " (not scaled at all)"
    return (f"your output is causal attention with the scores q . k x {c:.4g}{reading}, on every case: GPT-2's are "
            f"q . k / sqrt(D) = q . k x {1 / np.sqrt(Dh):.4g} (D = {Dh}); yours are {c * np.sqrt(Dh):.3g}x them. "
            "Scale once: q before its dot products, or each score")


def _first_head_only(cases, failing: list[str], results: dict, wants: dict) -> bool:
    """Every failing case has more than one head, and its first (b = 0, h = 0) is right where another is off."""
    for name, B, H, *_ in cases:
        if name not in failing:
            continue
        got, want = results[name][0].astype(np.float64), wants[name][0]
        close = np.isclose(got, want, rtol=1e-3, atol=1e-4).reshape(B * H, -1).all(axis=1)
        if B * H == 1 or not close[0] or close.all():
            return False
    return True


def _shared(cases, failing: list[str], inputs: dict, results: dict, caches: dict, wants: dict) -> list[str]:
    """What the failing cases share, when the outputs name no mistake (`caches`: each case's cache problems;
    `wants`: each case's expected output and caches)."""
    by = {name: (T, P, H * B, m) for name, B, H, T, P, D, N, m in cases}
    if not any(caches.values()) and (c := _scale_fit(inputs, results, wants)) is not None:
        return [_scaled(c, cases[0][5])]
    off = set(failing)
    lines = []
    if off == {n for n, (T, P, _, _) in by.items() if P > 0}:
        lines.append("off exactly where positions were cached before (P > 0), right where P = 0: which keys a new "
                     "query sees (0 .. P + t), or where the new keys and values are written (P .. P+T-1)")
    if off <= {n for n, (T, _, heads, _) in by.items() if T == 1 and heads == 1}:
        lines.append("off only at decode with a single head, where a head's keys are split between tasks: how the "
                     "parts are combined (each part's l and acc scaled by exp(m_part - m))")
    if _first_head_only(cases, failing, results, wants):
        lines.append("right on each case's first head (b = 0, h = 0), off on the others: where a head's numbers start "
                     "in memory: q, k, v and the result at ((b * H + h) * T + t) * D, the caches at ((b * H + h) * N "
                     "+ j) * D, N the caches' own length (n_positions), not P + T")
    nans = [n for n in failing if np.isnan(results[n][0]).any()]
    if nans and all(by[n][3] != 1.0 for n in nans):
        lines.append(f"NaN in the output only where the scores are large or far below 0 ({'; '.join(nans)}): exp of a "
                     "score not shifted by the running maximum overflows to inf (above 88) or underflows to 0, and "
                     "l is inf or 0; exp(s - m), with m the running maximum, stays finite")
    elif nans:
        lines.append(f"NaN in the output on {'; '.join(nans)}: a sum l of 0 (no key seen, or every exp(s - m) 0 "
                     "because m started above every score), a sum or accumulator never set to 0 (memory from "
                     "alloc, and a variable declared without a value, start with whatever was there), or a read "
                     "outside a tensor (the check surrounds each input with NaN)")
    return lines
