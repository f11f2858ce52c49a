"""Step 17's kernel read from what it computed when no catalogued mistake explains it (checker.diagnosis.reading
does the reading): each case's queries as rows of D values, their features, and what each reading means for
a FlashAttention kernel.

    readings(inputs, results, wants)   the lines for a failing kernel whose caches are right, and the
                                       catalogued mistake they name
    computed_as(inputs, results, wants)  the variant the first run computes on every case (also in a race)
    held_elsewhere(rows)               the off queries that hold another query's right output, and whose
    where_off(rows_of(results, wants))  which queries are off: those holding another query's right output,
                                       and what the others share (also in a race)
    nonfinite(rows)                    where NaN or inf appear, told as the arithmetic that makes them

A row is one query (b, h, t) of one case: it sees keys 0 .. P + t of its head's cache.
"""

from __future__ import annotations

import numpy as np

from checker.diagnosis.reading import (
    Above,
    Dimension,
    Rows,
    Rule,
    Variant,
    factors,
    first_variant,
    follows,
    lanes,
    read,
    relocated,
)
from checker.steps.step17.mistakes import MASK_NOT_OFFSET, UNSCALED
from checker.steps.step17.reference import KERNEL, attend, attention, kernel_cases

AXES = ("sequence", "head", "query", "")


def _features(case) -> dict[str, np.ndarray]:
    """Each row's features, rows in (b, h, t) order."""
    _, B, H, T, P, D, N, m = case
    b, h, t = (a.ravel() for a in np.meshgrid(np.arange(B), np.arange(H), np.arange(T), indexing="ij"))
    return {"b": b, "h": h, "head": b * H + h, "t": t, "keys": P + t + 1, "later": T - 1 - t, "P": P, "T": T,
            "S": P + T, "H": H, "B": B, "N": N, "heads": B * H, "decode": int(T == 1), "single": int(B * H == 1),
            "large": int(abs(m) > 1), "negative": int(m < 0)}


def judged(wants: dict) -> list[tuple]:
    """The kernel cases `wants` holds (every one, or those a crashing kernel ran), in kernel_cases' order."""
    return [case for case in kernel_cases() if case[0] in wants]


def rows_of(results: dict, wants: dict) -> Rows:
    """Every case's queries as rows [B * H * T, D]: the learner's output (its first run) against the right one;
    features "varies": the row is not the same in every run, and "right once": it is right in some run."""
    def varies(runs: np.ndarray, D: int) -> np.ndarray:
        runs = runs.reshape(len(runs), -1, D)
        return (~((runs == runs[:1]) | (np.isnan(runs) & np.isnan(runs[:1])))).any(axis=(0, 2)).astype(int)

    def right_once(runs: np.ndarray, want: np.ndarray, D: int) -> np.ndarray:
        runs, want = runs.reshape(len(runs), -1, D), want.reshape(-1, D)
        with np.errstate(invalid="ignore"):
            return (np.abs(runs - want) <= KERNEL.allowed(want)).all(axis=2).any(axis=0).astype(int)

    return Rows.of(((case[0], results[case[0]][0].reshape(-1, case[5]), wants[case[0]][0].reshape(-1, case[5]),
                     {**_features(case), "varies": varies(results[case[0]], case[5]),
                      "right once": right_once(results[case[0]], wants[case[0]][0], case[5])})
                    for case in judged(wants)), KERNEL)


def never_written(rows: Rows) -> bool:
    """Whether every query that changes from run to run is right in no run (rows_of's): memory no task writes
    (an output holds whatever its memory held), not two tasks writing one place, which some run gets right."""
    varies = rows.features["varies"] == 1
    return bool(varies.any() and not (varies & (rows.features["right once"] == 1)).any())


# What the rows that are off are, in a kernel's terms; the first that fits is said.
OFF = [
    Rule(lambda f: f["later"] > 0,
         "each call's last query is right and every earlier query of a prefill off (every decode right): the last "
         "query sees every key of its call, an earlier one only the keys up to itself, so what a mask or a bound "
         "changes shows on the earlier ones alone: the causal bound, query t sees keys 0 .. P + t and no later "
         "(the loop's end, or the mask's comparison)"),
    *(Rule(lambda f: f["later"] == 0,
           f"{said} and every earlier one right: the last query is the only one that sees key P + T - 1, its own: "
           "the keys end one short (the loop over keys stops before P + T)", within=within)
      for within, said in ((False, "each call's last query is off"),
                           (True, "off only on calls' last queries (not on every one)"))),
    Rule(lambda f: f["P"] > 0,
         "off exactly where positions were cached before (P > 0), right where P = 0: which keys a new query sees "
         "(0 .. P + t), or where the new keys and values are written (P .. P+T-1)"),
    Rule(lambda f: (f["decode"] == 1) & (f["single"] == 1),
         "off only at decode with a single head, where a head's keys are split between tasks: how the parts are "
         "combined (each part's l and acc scaled by exp(m_part - m))"),
    Rule(lambda f: f["decode"] == 1,
         "off at every decode (T = 1), right on every prefill: what your kernel does only when T = 1: a head's "
         "keys split between tasks (which keys each part and each tile of it reads: its start plus j) and "
         "combined, a query's index or bound when there is one new position"),
    Rule(lambda f: f["T"] > 1,
         "off on every query of a prefill (T > 1), each call's last included, right at every decode: what "
         "depends on the query's index t in a call of T: where q[t] and its output start (t * D), its bound "
         "P + t, the new keys other queries read"),
    Rule(lambda f: f["head"] > 0,
         "right on each case's first head (b = 0, h = 0), off on the others: where a head's numbers start in "
         "memory: q, k, v and the result at ((b * H + h) * T + t) * D, the caches at ((b * H + h) * N + j) * D"),
    Rule(lambda f: f["b"] > 0,
         "right on each case's first sequence (b = 0), off on every other: where a sequence's numbers start: "
         "head (b, h) is the (b * H + h)th of the B * H"),
    Rule(lambda f: f["t"] > 0,
         "each call's first query is right, every later one off: where query t's numbers start (q and the result "
         "at (head * T + t) * D) or the keys it sees (0 .. P + t)"),
    Rule(lambda f: (f["decode"] == 1) & (f["single"] == 1),
         "off only at decode with a single head (not on every such case), where a head's keys are split between "
         "tasks: each part's range of keys (where it starts and ends: every key in exactly one part) and how the "
         "parts are combined (each part's l and acc scaled by exp(m_part - m))", within=True),
    *(Rule(lambda f, k=k: f["t"] >= f["T"] - f["T"] % k,
           "off exactly on the queries after each call's last whole band of {alike} (every query of a shorter "
           "call, a decode's included), right on every whole band: the number of bands rounded down, T // band, "
           "leaves the last, partial band uncomputed; (T + band - 1) // band counts it", family="band", value=k)
      for k in (2, 4, 8, 16, 32)),
    *(Rule(lambda f, k=k: f["t"] % k != 0,
           f"each call's queries t = 0, {k}, {2 * k}, ... are right, every other off: queries go in bands of {k}; "
           f"within a band, which query a row reads or writes (the band's first t plus the row's index)")
      for k in (2, 4, 8, 16)),
    *(Rule(lambda f, w=w: f["keys"] % w != 0,
           "off only on queries whose number of keys (P + t + 1) is no multiple of {alike}, right on every one whose "
           "is: the keys after the last whole vector of {alike}: a vector loop's tail (the scores, their exps, or the "
           "values they weigh) left out or read wrong", within=within, family="vector", value=w)
      for within in (False, True) for w in (2, 4, 8, 16, 32, 64)),
    Rule(lambda f: f["large"] == 1,
         "off only on the cases whose scores are GPT-2's size (up to ~100): a step of the online softmax that "
         "small scores hide: the running maximum (exp(s - m) with m the largest score so far) and the rescale "
         "of l and acc when it grows"),
    Rule(lambda f: f["negative"] == 1,
         "off only where every score is far below 0 (around -5500), right everywhere else: what no score near 0 "
         "hides: a running maximum started above every score (at 0) leaves each exp(s - m) underflowing, to 0 "
         "or to the least value exp returns, so the weights no longer follow the scores; m starts at -inf"),
    Above("head", None, within="right on each case's first head (b = 0, h = 0); off only among the others "
          "({off} of {above}): where a head's numbers start in memory: q, k, v and the result at ((b * H + h) * T "
          "+ t) * D, the caches at ((b * H + h) * N + j) * D, N the caches' own length (n_positions), not P + T"),
    Above("t", "off exactly on the queries at index {first} and later in their call, each call's first {first} "
          "right, whatever P: a later band of a call's queries (where a band's rows start, t0, and what each row's "
          "keys are counted from: query t sees P + t + 1 keys, its index in the call, not in its band)",
          within="right on each call's first {first} queries, whatever P; off only among the later ones ({off} of "
          "{above}): a later band of a call's queries (where a band's rows start, t0, and what each row's keys are "
          "counted from: query t sees P + t + 1 keys, its index in the call, not in its band)", least=1),
    Above("keys", "off exactly on the queries that see more than {k} keys, right on those that see {k} or "
          "fewer (no case has a query that sees more than {below} and fewer than {first}): what happens after a "
          "first tile of {k} keys or more, fewer than {first}: the next tile's start and length (where each tile "
          "of it reads its keys and values, from j0), the rescale of l and acc by exp(m_old - m_new) when its "
          "maximum is larger",
          within="right on every query that sees {k} keys or fewer; off only among the queries that see more "
          "({off} of {above}): after the first {k} keys (a tile of {k}, or a part of a head's keys): where the "
          "next tile or part starts, and what carries over to it (the rescale of l and acc by exp(m_old - m_new) "
          "when the maximum grows, the combine of parts)", least=2),
]

# Where NaN or inf appear, in a kernel's terms: the arithmetic that makes them there.
START = ("the running maximum's starting -inf: exp(s - m) taken before m holds a score is exp(+inf) = inf, and "
         "inf / inf or inf x 0 is NaN; m_old - m_new is -inf - (-inf) = NaN while both are still -inf; the rescale "
         "factor the wrong way round, exp(m_new - m_old) for exp(m_old - m_new), is exp(+inf) = inf at the first "
         "key (m_old still the lowest float), and l x inf = 0 x inf = NaN")
NONFINITE = [
    Rule(lambda f: f["keys"] == 1,
         f"{{kind}} in the output only on the queries that see a single key: the first key's arithmetic, {START}"),
    Rule(lambda f: f["negative"] == 1,
         "{kind} in the output only where every score is far below 0: exp(s - m) underflows to 0 for every key when m "
         "starts above them (at 0), and l = 0 gives 0 / 0"),
    Rule(lambda f: f["large"] == 1,
         "{kind} in the output only where the scores are large: exp of a score not shifted by the running maximum "
         "overflows to inf (above 88), and l is inf; exp(s - m), with m the running maximum, stays finite"),
    Rule(lambda f: (f["large"] == 1) | (f["negative"] == 1),
         "{kind} in the output only where the scores are large or far below 0: exp of a score not shifted by the "
         "running maximum overflows to inf (above 88) or underflows to 0, and l is inf or 0; exp(s - m), with m "
         "the running maximum, stays finite", within=True),
    Rule(lambda f: (f["decode"] == 1) & (f["single"] == 1),
         "{kind} in the output only where a head's keys are split between tasks (decode, one head): the combine, "
         "where a part's m is still -inf (a part with no key, or whose running maximum was never updated from its "
         "start): exp(m_part - m) is then -inf - (-inf) = NaN when every part's is, and a part's own acc / l is "
         "0 / 0; update m with each tile's largest score, and divide once, after the parts are added"),
    Above("later", "{kind} in the output on the queries with more than {k} keys after them in their call (never on a "
          "call's last): keys past the query, masked to -inf: a tile whose every score is -inf has maximum "
          "-inf, and exp(-inf - (-inf)) is NaN; stop at key P + t rather than mask past it, or skip such a "
          "tile"),
    Rule(lambda f: f["head"] == f["heads"] - 1,
         "{kind} in the output only on each case's last head: a read past the end of a tensor (the check "
         "surrounds each with "
         "NaN): the last head's keys or values at j >= N, or its q past B * H * T * D"),
]


def nonfinite(rows: Rows) -> list[str]:
    """Where NaN or inf are in the learner's output (`rows`: the right output is finite everywhere), told by
    what arithmetic makes them there: [] when there are none."""
    mask = rows.nonfinite
    if not mask.any():
        return []
    cases = "; ".join(rows.cases(mask))
    values = rows.got[mask]
    kind = " and ".join(word for word, hit in (("NaN", np.isnan(values).any()), ("inf", np.isinf(values).any())) if hit)
    if mask.all():
        return [f"{kind} in every output, a query that sees a single key included (decode P=0): it is made "
                f"at the first key of every query, from the starting values: {START}; or l, acc or m never set "
                "(memory from alloc starts with whatever was there)"]
    if (said := read(rows, mask, NONFINITE)) is not None:
        return [f"{said.replace('{kind}', kind)} ({cases})"]
    return [f"{kind} in the output on {cases}: a sum l of 0 (no key seen, or every exp(s - m) 0 because m "
            "started above every score), a sum or accumulator never set to 0, or a read outside a tensor (the "
            "check surrounds each input with NaN)"]


def variants(inputs: dict, wants: dict) -> list[Variant]:
    """The reference computed with its inputs exchanged or its bound moved, each on the caches the kernel
    leaves (right, when this is asked): each as what it reads, (queries, keys, values, lo, hi), from a case
    and its q, k and caches."""
    cases = {case[0]: case for case in judged(wants)}

    def v(says, reads, mistake=None):
        def compute(name):
            q, k, _, _, _, past = inputs[name]
            _, kc, vc = wants[name]
            queries, keys, values, lo, hi = reads(cases[name], q, k, kc, vc)
            return attend(queries, keys, values, int(past[0]), lo, hi)
        return Variant(says, compute, mistake)

    zero = lambda P, t: 0  # noqa: E731
    bound = lambda P, t: P + t  # noqa: E731

    def strided(case, c, length: int):
        """A cache [B, H, N, D] read as if a head held `length` positions: head (b, h)'s key j at ((b * H + h) *
        length + j) * D (what lies past the cache's end read as NaN, as the check's guard holds)."""
        _, B, H, T, P, D, N, _ = case
        flat = c.reshape(-1).astype(np.float64)
        at = ((np.arange(B * H)[:, None] * length + np.arange(P + T)[None, :])[..., None] * D + np.arange(D))
        return np.where(at < flat.size, flat[np.minimum(at, flat.size - 1)], np.nan).reshape(B, H, P + T, D)

    def moved(c, d: int):
        """A cache [B, H, N, D] whose position j holds position j + d (past either end: NaN, as the guard)."""
        out = np.full(c.shape, np.nan)
        N = c.shape[2]
        out[:, :, max(-d, 0):N - max(d, 0)] = c[:, :, max(d, 0):N - max(-d, 0)]
        return out

    def queries_stored(case, q, k, kc, vc):
        P, T = case[4], case[3]
        kq = kc.copy()
        kq[:, :, P:P + T] = q
        return q, kq, vc, zero, bound

    return [
        v("query t sees keys 0 .. t, not 0 .. P + t", lambda c, q, k, kc, vc: (q, kc, vc, zero, lambda P, t: t),
          MASK_NOT_OFFSET),
        v("query t sees one key past itself, 0 .. P + t + 1: the causal bound is one too far (< P + t + 2, or <= "
          "P + t + 1)", lambda c, q, k, kc, vc: (q, kc, vc, zero, lambda P, t: P + t + 1)),
        v("every query sees all P + T keys of its call: no causal bound at all (the loop runs to P + T, or the "
          "mask is never applied)", lambda c, q, k, kc, vc: (q, kc, vc, zero, lambda P, t: 10**9)),
        v("query t sees keys 0 .. P + t - 1, not itself: the causal bound stops one short (< P + t, not <= P + t)",
          lambda c, q, k, kc, vc: (q, kc, vc, zero, lambda P, t: P + t - 1)),
        v("query t sees only the new keys P .. P + t: the P cached positions are skipped (the loop starts at P)",
          lambda c, q, k, kc, vc: (q, kc, vc, lambda P, t: P, bound)),
        v("query t sees keys 1 .. P + t: key 0 is skipped (the loop over keys starts at 1)",
          lambda c, q, k, kc, vc: (q, kc, vc, lambda P, t: 1, bound)),
        v("the keys are read from the value cache: scores q . v, not q . k",
          lambda c, q, k, kc, vc: (q, vc, vc, zero, bound)),
        v("the values are read from the key cache: the weights multiply k, not v",
          lambda c, q, k, kc, vc: (q, kc, kc, zero, bound)),
        v("keys and values exchanged: scores from the value cache, weights on the key cache",
          lambda c, q, k, kc, vc: (q, vc, kc, zero, bound)),
        v("the new keys k are read as the queries: scores k . keys, not q . keys (k and q exchanged)",
          lambda c, q, k, kc, vc: (k, kc, vc, zero, bound)),
        v("the queries are read where the new keys belong: the scores of the new positions are q . q",
          queries_stored),
        v("every head reads head 0's caches (of its sequence): the head's offset is missing from the cache's "
          "index, (b * H + h) * N",
          lambda c, q, k, kc, vc: (q, np.repeat(kc[:, :1], c[2], 1), np.repeat(vc[:, :1], c[2], 1), zero, bound)),
        v("every sequence reads sequence 0's caches: b is missing from the cache's index, (b * H + h) * N",
          lambda c, q, k, kc, vc: (q, np.repeat(kc[:1], c[1], 0), np.repeat(vc[:1], c[1], 0), zero, bound)),
        *(v(f"the {which} are read one position {way}: key j's {which[:-1]} at position j {sign} 1 of the cache, "
            "the index into it one off",
            lambda c, q, k, kc, vc, which=which, d=d: (q, moved(kc, d), vc, zero, bound) if which == "keys" else
            (q, kc, moved(vc, d), zero, bound))
          for which in ("keys", "values") for d, way, sign in ((1, "later", "+"), (-1, "earlier", "-"))),
        *(v(f"the caches are read as if a head held {said} positions, not N: head (b, h)'s key j at ((b * H + h) * "
            f"{said} + j) * D; the caches' own length N = n_positions sets a head's stride",
            lambda c, q, k, kc, vc, length=length: (q, strided(c, kc, length(c)), strided(c, vc, length(c)), zero,
                                                    bound))
          for said, length in (("P + T", lambda c: c[4] + c[3]), ("T", lambda c: c[3]), ("P", lambda c: c[4]),
                               ("D", lambda c: c[5]))),
    ]


def _scale_fit(inputs: dict, results: dict, wants: dict, names: list[str]) -> float | None:
    """The factor c for which causal attention with scores q . k x c is the learner's output on every case
    `names` (fitted on the first, then held to each at the check's tolerance), or None."""
    first = inputs[names[0]]
    got = results[names[0]][0].astype(np.float64)
    if not np.isfinite(got).all():
        return None
    _, kc, vc = wants[names[0]]
    P = int(first[5][0])

    def error(c: float) -> float:
        return float(np.abs(attention(first[0], kc, vc, P, scale=c) - got).max())

    grid = np.float64(2.0) ** np.linspace(-12, 6, 181)  # 2^-12 .. 2^6, 7% apart
    best = int(np.argmin([error(c) for c in grid]))
    low, high = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
    for _ in range(40):  # golden-section search between the grid's neighbours
        a, b = high - (high - low) / 1.618, low + (high - low) / 1.618
        low, high = (low, b) if error(a) < error(b) else (a, high)
    c = (low + high) / 2
    for name in names:
        _, kc, vc = wants[name]
        want = attention(inputs[name][0], kc, vc, int(inputs[name][5][0]), scale=c)
        if not (np.abs(results[name][0].astype(np.float64) - want) <= KERNEL.allowed(want)).all():
            return None
    return c


def scaled(c: float, D: int) -> str:
    """What a fitted scale says: c against GPT-2's 1 / sqrt(D), and as a power of sqrt(D) when it is one."""
    power = -np.log(c) / np.log(np.sqrt(D))  # c = sqrt(D)^-power
    reading = ""
    if abs(power - round(power)) < 0.01 and round(power) != 1:
        reading = f" = q . k / sqrt(D)^{round(power)}" if round(power) else " (not scaled at all)"
    return (f"your output is causal attention with the scores q . k x {c:.4g}{reading}, on every case: GPT-2's are "
            f"q . k / sqrt(D) = q . k x {1 / np.sqrt(D):.4g} (D = {D}); yours are {c * np.sqrt(D):.3g}x them. "
            "Scale once: q before its dot products, or each score")


DIMENSIONS = [Dimension("H", "the heads, dimension 1 of q", "H"), Dimension("T", "the new positions", "T"),
              Dimension("P + T", "the keys a call sees", "S"), Dimension("N", "the caches' length", "N"),
              Dimension("B", "the batch", "B"), Dimension("B x H", "the heads of the batch", "heads")]


def _scale_per_case(inputs: dict, results: dict, wants: dict) -> str | None:
    """When each case's output is attention with a scale of its own, and the scales follow one of the case's
    dimensions: which, in words."""
    cases = judged(wants)
    fitted, told = [], []  # each case's scale, and the cases it can be told on
    for case in cases:
        _, kc, vc = wants[case[0]]
        q, P, D = inputs[case[0]][0], int(inputs[case[0]][5][0]), case[5]
        if np.allclose(*(attention(q, kc, vc, P, scale=f / np.sqrt(D)) for f in (8, 1 / 8))):
            continue  # the same whatever the scale: every query sees one key, or one key leads by far
        if (c := _scale_fit(inputs, results, wants, [case[0]])) is None:
            return None
        at_c = attention(q, kc, vc, P, scale=c)
        if (np.abs(attention(q, kc, vc, P, scale=1.01 * c) - at_c) > KERNEL.allowed(at_c)).any():
            fitted.append(c)  # a case whose output tells its scale to 1%
            told.append(case)
    D = cases[0][5]
    features = {key: np.array([_features(case)[key] for case in told]) for key in ("H", "T", "S", "N", "B", "heads")}
    for base, word in ((1.0, ""), (1 / np.sqrt(D), " / sqrt(D)"), (1 / D, " / D")):
        if (found := follows(np.array(fitted), features, DIMENSIONS, base)) is not None:
            power, dim = found
            return (f"your output is attention with a scale of its own on each case ("
                    f"{', '.join(f'{c:.3g}' for c in fitted)}): {power}{word} on every case, so your scale is computed "
                    f"from {dim.name} ({dim.meaning}); GPT-2's is 1 / sqrt(D) = {1 / np.sqrt(D):.4g} on every case, D "
                    "the last dimension of q")
    return None


def computed_as(inputs: dict, results: dict, wants: dict) -> Variant | None:
    """The first variant whose output is the learner's (its first run) on every case, or None."""
    names = [case[0] for case in judged(wants)]
    return first_variant(names, {name: results[name][0] for name in names}, variants(inputs, wants), KERNEL, AXES)


def held_elsewhere(rows: Rows) -> tuple[str, np.ndarray] | None:
    """The off queries that hold another query's right output, which query's, in a line (relocated's), and which."""
    return relocated(rows, rows.off, (("b", "sequence"), ("h", "head"), ("t", "query")), ("query", "queries"),
                     "where a query's output is stored, at ((b * H + h) * T + t) * D, or which query's q and keys it "
                     "is computed from")


def where_off(rows: Rows, moved: tuple[str, np.ndarray] | None = None) -> list[str]:
    """Which queries are off (rows_of's): those that hold another query's right output, which query's
    (`moved`, held_elsewhere's, when the caller has it); then what the others share, read by OFF (a query that sees
    one key is right whatever the softmax does, so it is left out). [] when nothing is read."""
    off = rows.off
    care = rows.features["keys"] > 1
    lines = []
    if (moved := moved or held_elsewhere(rows)) is not None:
        said, held = moved
        lines.append(said)
        off, care = off & ~held, care & ~held
        if off.any():
            varies, zero = rows.features["varies"][off] == 1, (rows.got[off] == 0).all(axis=1)
            lines.append(f"the other {off.sum()} off queries hold no query's right output" + (
                ", every value 0: never written, it seems" if zero.all() else
                ", and change from run to run: never written (the output holds what its memory held), or written by "
                "two tasks at once" if varies.all() else ""))
    if (said := read(rows, off, OFF, care=care)) is not None:
        lines.append(f"leaving those out, {said}" if len(lines) else said)
    elif not lines and (~care).any() and not (off & ~care).any() and off.sum() >= 0.9 * care.sum():
        n, m = off.sum(), care.sum()
        said = "every query that sees" if n == m else f"{n} of the {m} queries that see"
        lines.append(f"off on {said} more than one key, right on each that sees one (its weight is 1 "
                     "whatever its score, and it takes key 0's value): the scores q . k (which q and which keys are "
                     "read, a vector's offset within them, the scale) or the weights made from them (exp(s - m), "
                     "the sum l)")
    return lines


def readings(inputs: dict, results: dict, wants: dict) -> tuple[list[str], object | None]:
    """What the learner's output is, read from the outputs (its caches right): the lines to show, and the
    catalogued mistake they name (None when none). A variant or a scale that computes every case is said
    alone; otherwise what the off queries share, and where NaN or inf appear."""
    if (variant := computed_as(inputs, results, wants)) is not None:
        return [f"your output is attention computed as if {variant.says}, on every case"], variant.mistake
    names = [case[0] for case in judged(wants)]
    if (c := _scale_fit(inputs, results, wants, names)) is not None:
        return [scaled(c, kernel_cases()[0][5])], UNSCALED if abs(c - 1) < 1e-3 else None
    if (per_case := _scale_per_case(inputs, results, wants)) is not None:
        return [per_case], None
    rows = rows_of(results, wants)
    lines = nonfinite(rows)
    off = rows.off & ~rows.nonfinite
    c = factors(rows)[off]
    if len(c) and np.isfinite(c).all() and np.ptp(c) > 1e-3 * np.abs(c).max():
        lines.append(f"each off query's output is its right output times a number of its own ({c.min():.3g} .. "
                     f"{c.max():.3g}): its weights do not sum to 1. The normalisation by the sum l: that l adds every "
                     "exp(s - m) the query's keys give, rescaled by exp(m_old - m_new) as m grows like acc, and that "
                     "acc is divided by it once, at the end")
    elif len(c) and np.isfinite(c).all():
        lines.append(f"every off query's output is its right output times {c[0]:.4g}: a factor on the output, not "
                     "on the scores (a scale applied to acc or to the result, or a division by the wrong sum)")
    lines += where_off(rows)
    if (said := lanes(rows, "off only on lanes {lanes} of each query's D = {C} values, the others right: the loop "
                      "over D in vectors (its last vector, or its start) when the output or acc is written")):
        lines.append(said)
    return lines, None
