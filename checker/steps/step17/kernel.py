"""Step 17's kernel part: the learner's flash_attention (their Mojo) in a child process on kernel_cases, three
runs each, against numpy in float64: its output, and the caches it leaves (the new keys and values at
P .. P+T-1, every other position untouched). A mistake is named when what it computes equals the learner's
output and caches on every case; otherwise the failing cases are described by what they share.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from checker.diagnosis.crashes import crash_part
from checker.harness.runner import StepRun
from checker.reporting.compare import compare, differs
from checker.reporting.report import FAIL, PASS, Part
from checker.running.mojo import REPEATS, Crashed, run_kernel
from checker.steps.step17.mistakes import BY_CACHES, CATALOGUE, CUT, LAST_TILE, READ, TILES, cuts, output
from checker.steps.step17.reading import computed_as, held_elsewhere, never_written, readings, rows_of, where_off
from checker.steps.step17.reference import KERNEL, case_arrays, expected, kernel_cases
from runtime.learner import LearnerError

SEED = 17
UNWRITTEN = ("the outputs that change from run to run are right in no run and hold no other query's output: never "
             "written, it seems (an output holds whatever its memory held before, another thing each run), not two "
             "tasks writing one place: no task computes them")
AXES = ("sequence", "head", "query", "")
INDICES = ("q, k, v and the output [B, H, T, D] below (B * H * T) * D; the caches [B, H, N, D] below B * H * N * D, "
           "a head's key j at ((b * H + h) * N + j) * D, and P + T at most N")


WORDS = {"T": "T, the new rows (queries) of the call", "P": "P, the positions cached before the call",
         "H": "H, the heads", "B": "B, the sequences", "N": "N, the positions the caches hold"}


FLOAT16_CACHES = ("your empty_flash_cache makes float16 caches, and MAX could not build the op for them: declare the "
                  "kernel's caches so they take either dtype, k_cache: InputTensor[rank=4, ...] and v_cache: "
                  "InputTensor[dtype=k_cache.dtype, rank=4, ...] (store with .cast[k_cache.dtype](), read back with "
                  ".cast[DType.float32]()), or make float32 caches")


def arrays(dtype: np.dtype = np.dtype(np.float32)) -> dict[str, list[np.ndarray]]:
    """Each case's inputs: q, k, v, k_cache, v_cache (of `dtype`: the learner's caches'), past."""
    return {case[0]: case_arrays(case, SEED, dtype) for case in kernel_cases()}


def _cache_problem(name: str, got: np.ndarray, want: np.ndarray, before: np.ndarray, P: int, T: int,
                   what: str, call: dict[str, np.ndarray] | None = None) -> str | None:
    """What is wrong with the cache `what` the kernel left ([B, H, N, D]), or None; `call` {"q": q, ...}: the
    call's new rows [B, H, T, D], one of which the new positions may hold instead."""
    if np.array_equal(got, want, equal_nan=True):
        return None
    rows = np.flatnonzero(np.any(differs(got, want), axis=(0, 1, 3)))
    new = set(range(P, P + T))
    if np.array_equal(got, before, equal_nan=True):
        return f"{what} is as it was before the call on {name}: the new positions {P} .. {P + T - 1} were not written"
    listed = ", ".join(map(str, rows[:8])) + (", ..." if len(rows) > 8 else "")
    written = got[:, :, P:P + T].astype(np.float32)
    held = next((label for label, rows_ in (call or {}).items()
                 if np.array_equal(written, rows_.astype(got.dtype).astype(np.float32))), None)
    if held is not None and np.array_equal(np.delete(got, np.s_[P:P + T], axis=2),
                                           np.delete(want, np.s_[P:P + T], axis=2), equal_nan=True):
        return (f"{what} holds the call's {held} at the new positions {P} .. {P + T - 1} on {name}: the store into "
                f"{what} reads {held} where {'k' if what == 'k_cache' else 'v'} belongs")
    if not new & set(rows.tolist()):
        return (f"{what} differs at positions {listed} on {name}, though its new positions {P} .. {P + T - 1} are "
                "right: a write outside them (over the cached positions, or past them)")
    off = differs(got, want)  # [B, H, N, D]
    heads = np.argwhere(off.any(axis=(2, 3)))  # [(b, h)] of the heads that differ
    B, H = got.shape[:2]
    which = ""
    if len(heads) < B * H:  # some heads only: which, as (b, h) where there are sequences to tell apart
        named = [f"{h}" if B == 1 else f"(b {b}, h {h})" for b, h in heads[:8].tolist()]
        which = (f" on head {', '.join(named)}{', ...' if len(heads) > 8 else ''} only "
                 f"(of {B * H}{' (b, h)' if B > 1 else ''})")
    new_off = off[:, :, P:P + T]
    never = (": still the NaN the check put at the new positions, never written there (a task that never ran, or "
             "stopped before its store)"
             if not np.delete(off, np.s_[P:P + T], axis=2).any() and np.isnan(got[:, :, P:P + T][new_off]).all()
             else "")
    return f"{what} differs at positions {listed}{which} on {name} (the new ones are {P} .. {P + T - 1}){never}"


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
    except Crashed as e:
        features = {name: dict(T=T, P=P, H=H, B=B, N=N) for name, B, H, T, P, _, N, _ in kernel_cases()}
        ran = [case for case in kernel_cases() if case[0] in e.results]
        return run.add(crash_part("kernel", e, features, WORDS, judge(inputs, e.results, ran) if ran else None))
    except LearnerError as e:
        part = Part.from_error("kernel", e)
        if dtype == np.float16 and "Failed to compile" in str(e):
            part.details.append(FLOAT16_CACHES)
        return run.add(part)
    return run.add(judge(inputs, results))


def judge(inputs: dict[str, list[np.ndarray]], results: dict[str, np.ndarray], cases: list | None = None) -> Part:
    """The kernel part of `results` ({name: [R, B, H, T, D]}, {name#3, name#4: the caches after each run}) on
    `cases` (every kernel case, or those a crashing kernel ran)."""
    cases = kernel_cases() if cases is None else cases
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
        split = ("a split reads the new position P (its key and value) before the task that stores it has: store "
                 "it before the splits start, or in the split that reads it, before it reads")
        rows = rows_of(results, wants)
        # an output that holds another query's: two tasks store to one place, whatever else the cases share
        moved = held_elsewhere(rows)
        misplaced = [problem for name in raced for problem in caches[name]]
        if moved is None and never_written(rows):  # what changes is right in no run: memory no task writes
            return Part("kernel", FAIL, f"the same input gave different outputs in {REPEATS} runs on "
                        f"{'; '.join(raced)}", [*misplaced[:2], UNWRITTEN, *where_off(rows)])
        prefill_only = all(T > 1 for name, B, H, T, *_ in cases if name in raced) and moved is None
        split_only = all(T == 1 and B * H == 1 for name, B, H, T, *_ in cases if name in raced) and moved is None
        lines = ([f"only where T > 1 (a prefill): {early}", f"or {both}"] if prefill_only else
                 [f"only at decode where one head's keys are split between tasks: {split}", f"or {both}"]
                 if split_only else [both, f"or {early}"])
        # what the first run computed, or which of its outputs are off (not on the few cases a crash leaves)
        if not any(caches.values()) and len(cases) == len(kernel_cases()):
            if (variant := computed_as(inputs, results, wants)) is not None:
                lines = [f"in the first run, your output is attention computed as if {variant.says}", *lines]
            elif off := where_off(rows, moved):
                lines = [f"in the first run, {off[0]}", *off[1:], *lines]
        if misplaced:  # the writes do not race
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
    named, cut = _named(inputs, results, [name for name, *_ in cases])
    first = failing[0]
    verdict = verdicts[first]
    details = [*caches[first], f"right on: {'; '.join(n for n, *_ in cases if n not in failing) or 'none'}",
               *([] if caches[first] else [f"{first}: {verdict.summary}", *(f"  {d}" for d in verdict.details)])]
    if len(failing) > 1:
        details.append(f"also off: {'; '.join(failing[1:])}")
    if named is None and not any(caches.values()):  # what the output is, read from it, first
        lines, named = readings(inputs, results, wants)
        details = lines + details
    elif cut:
        details.append(cut)
    return Part("kernel", FAIL, f"off on {len(failing)} of {len(cases)} cases", details, named, verdict.margin)


def _caches(name: str, arrays: list[np.ndarray], want: tuple, results: dict) -> list[str]:
    """What is wrong with the two caches the kernel left on case `name` (its first run), against `want`
    (expected's): [] when both are right."""
    q, k, v, k_cache, v_cache, past = arrays
    P, T = int(past[0]), q.shape[2]
    _, kc, vc = want
    return [problem for i, (after, before, label) in enumerate(((kc, k_cache, "k_cache"), (vc, v_cache, "v_cache")))
            if (problem := _cache_problem(name, results[f"{name}#{i + 3}"][0], after, before, P, T, label,
                                          {"q": q, "k": k, "v": v}))]


def _matches(got: np.ndarray, kc: np.ndarray, vc: np.ndarray, out, caches_only: bool) -> bool:
    """The learner's caches equal what a mistake leaves, and (unless `caches_only`) their output what it
    computes (its NaN where it has NaN)."""
    output, want_k, want_v = out
    return np.array_equal(kc, want_k, equal_nan=True) and np.array_equal(vc, want_v, equal_nan=True) and (
        caches_only or compare(got.astype(np.float64), np.asarray(output, np.float64), axes=AXES, mistakes=[],
                               tol=KERNEL).ok)


def _named(inputs: dict, results: dict, names: list[str]) -> tuple[object | None, str | None]:
    """The catalogued mistake whose output and caches equal the learner's on every case of `names`, cut the
    same way on each (one tile size, one split count), or None; and, when the tile is what makes its output,
    the tile sizes that do, in words. Those the readings name (a bound, a scale) are left to them."""
    for mistake in CATALOGUE:
        if mistake in READ:
            continue
        tiles = sorted({tile for tile, splits, floor in cuts(mistake)
                        if all(_matches(results[name][0], results[f"{name}#3"][0], results[f"{name}#4"][0],
                                        output(mistake, inputs[name], tile, splits, floor), mistake in BY_CACHES)
                               for name in names)})
        if tiles:
            return mistake, _tiles(mistake, tiles) if len(tiles) < len(TILES) and mistake in CUT else None
    return None, None


def _tiles(mistake, tiles: list[int]) -> str:
    """What the tile sizes that explain a kernel's output say of it: where its loop over keys steps."""
    sizes = ", ".join(map(str, tiles[:-1])) + (" or " if len(tiles) > 1 else "") + str(tiles[-1])
    loop = ("a tile, or a vector of keys inside one: the keys after the last whole one" if mistake is LAST_TILE
            else "your tile: where the next tile's scores meet what the ones before it summed")
    return (f"the mistake below computes your output on every case with the keys taken {sizes} at a time: in your "
            f"kernel, a loop over keys that steps by {sizes} ({loop})")
