"""Step 16's quantize and dequantize parts: the learner's functions on small rows whose K is no multiple of
BLOCK and on the checkpoint's own weights, against runtime.quantize exactly (q) and to float32 rounding
(the scales)."""

from __future__ import annotations

import numpy as np

from checker.harness.runner import StepRun
from checker.reporting.compare import Tolerance, compare
from checker.reporting.report import FAIL, PASS, Part
from checker.steps.step16.mistakes import DEQUANTIZE_MISTAKES, MISTAKES
from runtime import quantize as ref
from runtime.checkpoints import Checkpoint
from runtime.learner import LearnerError
from runtime.loading import stored_tensors
from runtime.quantize import BLOCK

SCALES = Tolerance(0.0, 3e-7)  # float32 rounding of max|w| / 127, however it is computed


def quantize_cases(checkpoint: Checkpoint) -> dict[str, np.ndarray]:
    """name -> w [M, K] float32: small rows whose K is no multiple of BLOCK (one row all zeros), then block
    0's weights of each product and the head's first rows, as the Linear [out, in] they are."""
    rng = np.random.default_rng(16)
    cases = {f"w [{m}, {k}]": rng.standard_normal((m, k), dtype=np.float32)
             for m, k in ((3, 32), (4, 45), (2, 100), (5, 7))}
    cases["w [4, 45]"][1] = 0.0  # a row of zeros: scales 0, q 0
    stored = stored_tensors(checkpoint)
    for name, value in stored.items():
        if ".h.0." in name and ref.is_product(name):
            cases[name.split(".h.0.")[1].removesuffix(".weight")] = np.ascontiguousarray(value.T)
    head = next(value for name, value in stored.items() if name.endswith(ref.HEAD))
    cases["head (wte), first 512 rows"] = head[:512]
    return cases


def _tipped(w: np.ndarray, scales: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Where w / scale is within float rounding of a half and q is one of its two neighbours: its rounding may
    tip either way."""
    per_column = np.repeat(scales, BLOCK, axis=1)[:, :w.shape[1]].astype(np.float64)
    ratio = w.astype(np.float64) / np.where(per_column == 0, 1, per_column)
    near = np.abs(np.abs(ratio - np.trunc(ratio)) - 0.5) < 1e-4
    return near & ((q == np.floor(ratio)) | (q == np.ceil(ratio)))


# What a block's scale may be made of: (formula, what it means, the statistic); max |w| / 127 is the reference's
STATISTICS = [("max |w|", "", lambda g: np.abs(g).max(-1)),
              ("max w", " (the largest w, not the largest |w|: the abs is missing)", lambda g: g.max(-1)),
              ("-min w", " (the most negative w, not the largest |w|)", lambda g: -g.min(-1)),
              ("max w - min w", " (the block's range)", lambda g: g.max(-1) - g.min(-1)),
              ("mean |w|", "", lambda g: np.abs(g).mean(-1))]


def scales_read(cases: dict[str, np.ndarray], scales: dict[str, np.ndarray]) -> str | None:
    """When every case's scales [M, KB] are one statistic of each block of BLOCK columns of w divided by one
    number c (the same on every case, the blocks where either is 0 left out): "max w / 127", in words; None
    when none is, or when it is the reference's max |w| / 127."""
    for formula, meaning, statistic in STATISTICS:
        ratios = []
        for name, w in cases.items():
            got = np.asarray(scales[name], np.float64)
            blocks = -(-w.shape[1] // BLOCK)
            if got.shape != (w.shape[0], blocks):
                return None
            stat = np.stack([statistic(w[:, j * BLOCK:(j + 1) * BLOCK].astype(np.float64)) for j in range(blocks)], 1)
            used = (stat != 0) & (got != 0)
            ratios.append(stat[used] / got[used])
        ratios = np.concatenate(ratios)
        if len(ratios) and np.allclose(ratios, ratios[0], rtol=1e-5):
            c = float(np.median(ratios))
            if formula == "max |w|" and abs(c - 127) < 1e-3:
                return None
            return (f"your scales are {formula} / {c:.6g} of each block of {BLOCK}, on every weight{meaning}; the "
                    "reference's are max |w| / 127, so that a block's largest |w| becomes 127 exactly")
    return None


# How a learner may round a tie (w / scale = k + 0.5 exactly), besides np.rint's to even
TIE_RULES = [("half up (np.floor(x + 0.5))", lambda r: np.floor(r + 0.5)),
             ("half away from zero (C's round)", lambda r: np.sign(r) * np.floor(np.abs(r) + 0.5)),
             ("half down", lambda r: np.ceil(r - 0.5)),
             ("half towards zero", lambda r: np.sign(r) * np.ceil(np.abs(r) - 0.5))]


def ties_rule(cases: dict[str, np.ndarray], got: dict, want: dict) -> tuple[str, int] | None:
    """When the learner's q rounds every exact tie of the reference's float32 division (w / scale = k + 0.5, its
    scales equal to the reference's) by one rule other than np.rint's, and that rule moves two or more of them:
    (the rule in words, how many it moved); else None (a tie tipped now and then is float rounding, allowed)."""
    ties, learner = [], []
    for name, w in cases.items():
        (q, scales), (_, ws) = got[name], want[name]
        if q.shape != w.shape or np.shape(scales) != ws.shape or not np.array_equal(scales, ws):
            continue
        per_column = np.repeat(ws, BLOCK, axis=1)[:, :w.shape[1]]
        ratio = (w / np.where(per_column == 0, np.float32(1), per_column)).astype(np.float64)
        exact = (per_column != 0) & (ratio - np.floor(ratio) == 0.5) & (np.abs(ratio) < 127)
        ties.append(ratio[exact])
        learner.append(q[exact].astype(np.float64))
    if not ties:
        return None
    ties, learner = np.concatenate(ties), np.concatenate(learner)
    moved = int((learner != np.rint(ties)).sum())
    for said, rule in TIE_RULES:
        if moved >= 2 and np.array_equal(learner, rule(ties)):
            return said, moved
    return None


def _arrays(got, what: str) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(got, tuple) or len(got) != 2:
        raise LearnerError(f"{what} returned {type(got).__name__}, expected a tuple (q, scales)")
    return np.asarray(got[0]), np.asarray(got[1])


def quantize_part(run: StepRun, quantize, cases: dict[str, np.ndarray]) -> Part:
    try:
        got = {name: _arrays(run.call(quantize, w.copy()), "quantize(w)") for name, w in cases.items()}
    except LearnerError as e:
        return run.add(Part.from_error("quantize", e))
    want = {name: ref.quantize(w) for name, w in cases.items()}
    if (rule := ties_rule(cases, got, want)) is not None:
        return run.add(Part("quantize", FAIL, f"q rounds every tie (w / scale = k + 0.5 exactly) {rule[0]}: "
                            f"{rule[1]} weights are 1 off. np.rint rounds a tie to the even neighbour, as the "
                            "skeleton says (ties to even); use np.rint"))
    for name, (q, scales) in got.items():
        if q.dtype != np.int8:
            return run.add(Part("quantize", FAIL, f"q is {q.dtype} on {name}, int8 expected: the kernel reads one "
                                "byte a weight"))
        if q.shape == want[name][0].shape:  # a tie float rounding tipped the other way counts as right
            tipped = _tipped(cases[name], want[name][1], q)
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
                if (said := scales_read(cases, {n: got[n][1] for n in cases})) is not None:
                    on_q.details.append(said)
            return on_q, "q"
        return on_scales, "scales"

    return _cases_part(run, "quantize", {name: verdict(name) for name in cases}, MISTAKES,
                       lambda m, fn: all(_same(got[n], fn(cases[n])) for n in cases))


def _same(got: tuple, out: tuple) -> bool:
    return all(a.shape == b.shape and np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=3e-7, atol=0)
               for a, b in zip(got, out))


def dequantize_part(run: StepRun, dequantize, cases: dict[str, np.ndarray]) -> Part:
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
