"""Reading a kernel's mistake from what it computed, as a reviewer reads it, without knowing the mistake in
advance. Steps 15, 16 and 17's judges share it: each lays its cases out as rows (one query's output of
attention, one output of a product), with each row's features (the keys it sees, its head, whether it is
its call's last query, the width K of its product), and hands over the readings that mean something for
its kernel, in its own words. This module finds which reading explains what was computed:

    Rows.of(cases, tol)                 every case's rows side by side: got, want [rows, C], each row's
                                        features, which rows are off, which hold NaN or inf
    Rule(holds, says), Above(...)       a set of rows, read by the features: "off exactly where ..."
    read(rows, mask, rules)             the first rule whose rows are exactly those of `mask` (off, or
                                        non-finite); else a bound `mask` stays within ("right on every row
                                        with K <= 16"); None when neither says anything true
    lanes(rows, says)                   off only on some lanes of every row (a vector's tail of D)
    factors(rows)                       each row's c where got = c x want, NaN where no single c fits: one
                                        number a row is a normalisation, one for everything a factor
    relocated(rows, mask, coords, ...)  off rows that hold another row's right output, and which row's, told
                                        by their coordinates ("sequence 0 holds sequence 1's"): a result
                                        written at another row's place, or computed from another row's inputs
    follows(c, features, dimensions)    numbers, one a case, that are a power of one of its dimensions
                                        ("1 / sqrt(H)"): a scale computed from the wrong dimension
    Variant, first_variant(...)         the reference computed with its inputs exchanged (the value cache
                                        read for the keys, q for k, another head's cache, a bound one key
                                        later): the first that computes the learner's output on every case
    variant_of_rows(rows, mask, ...)    the first that computes the rows of `mask` (the off ones), when none
                                        computes them all: what one way through the kernel did

Every reading is a statement that holds on every row of every case (or says which rows it holds on), so a
message built from one says nothing false.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from checker.reporting.compare import Tolerance, compare, ranges


@dataclass
class Rows:
    """Every case's rows side by side: got and want [rows, C] in float64, what the tolerance allows for each
    value, each row's case (its name, and its number), and each row's features {name: [rows]}."""

    got: np.ndarray
    want: np.ndarray
    allowed: np.ndarray
    case: np.ndarray  # [rows] the case's name
    features: dict[str, np.ndarray]
    index: np.ndarray  # [rows] the case's number, in the order the cases came

    @classmethod
    def of(cls, cases: Iterable[tuple[str, np.ndarray, np.ndarray, dict]], tol: Tolerance) -> Rows:
        """`cases`: (name, got, want, features), got and want [rows, C] of one case, each feature a number for
        the whole case or one per row."""
        gots, wants, allowed, names, features = [], [], [], [], {}
        for name, got, want, feats in cases:
            n, want = len(want), np.asarray(want, np.float64)
            gots.append(np.asarray(got, np.float64))
            wants.append(want)
            allowed.append(tol.allowed(want))
            names.append(name)
            for key, value in feats.items():
                features.setdefault(key, []).append(np.broadcast_to(np.asarray(value), (n,)))
        sizes = [len(want) for want in wants]
        return cls(np.concatenate(gots), np.concatenate(wants), np.concatenate(allowed),
                   np.repeat(np.array(names), sizes), {key: np.concatenate(v) for key, v in features.items()},
                   np.repeat(np.arange(len(sizes)), sizes))

    @property
    def bad(self) -> np.ndarray:
        """[rows, C]: values off (NaN and inf off where the reference is finite)."""
        with np.errstate(invalid="ignore"):
            return ~(np.abs(self.got - self.want) <= self.allowed)

    @property
    def off(self) -> np.ndarray:
        return self.bad.any(axis=1)

    @property
    def nonfinite(self) -> np.ndarray:
        return ~np.isfinite(self.got).all(axis=1)

    def cases(self, mask: np.ndarray) -> list[str]:
        """The cases holding a row of `mask`, in order."""
        return list(dict.fromkeys(self.case[mask].tolist()))


@dataclass(frozen=True)
class Rule:
    """The rows where `holds(features)` is true; `says` reads the rows in question being exactly those (or,
    `within`, being among them, every other row right). Rules of one `family` differ by a number (`value`, a
    group's size): where several hold on the same rows, the one said names them all in its {alike} ("8, 16 or
    32"), since the rows cannot tell them apart."""

    holds: Callable[[dict], np.ndarray]
    says: str
    within: bool = False
    family: str | None = None
    value: int | None = None


def _said(rule: Rule, rules: list, features: dict, reads: Callable[[np.ndarray], bool]) -> str:
    """`rule.says`, its {alike} filled with the values of its family's rules (`within` as it) whose rows `reads`
    as it reads the rule's own (the rows in question exactly, or a bound on them)."""
    if rule.family is None:
        return rule.says
    alike = [r.value for r in rules if isinstance(r, Rule) and r.family == rule.family and r.within == rule.within
             and reads(r.holds(features))]
    words = ", ".join(map(str, alike[:-1])) + (" or " if len(alike) > 1 else "") + str(alike[-1])
    return rule.says.format_map(_Kept(alike=words))


@dataclass(frozen=True)
class Above:
    """The rows whose `feature` is above some k >= `least`, for each k the rows show; `says` (with {k}) reads
    the rows in question being exactly those, `within` (with {k}, {off}, {above}) that they are among them,
    every row at or below k right (None: no such reading). Both may also name {below}, the largest value the
    rows hold at or below k, and {first}, the least above it: where values are sparse (a few numbers of rows),
    the bound lies somewhere between the two."""

    feature: str
    says: str | None
    within: str | None = None
    least: int = 0


class _Kept(dict):
    """Fields a reading fills, any other left as it is ("{kind}", for the step to fill)."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _thresholds(features: dict, rule: Above) -> list[tuple[int, np.ndarray]]:
    values = features[rule.feature]
    return [(k, values > k) for k in np.unique(values)[:-1].tolist() if k >= rule.least]


def read(rows: Rows, mask: np.ndarray, rules: Iterable[Rule | Above], care: np.ndarray | None = None) -> str | None:
    """What the rows of `mask` are, by the first rule whose rows are exactly them; else by the bounds they stay
    within (a `within` Rule's rows, or an Above's: every row at or below k outside `mask`), each with rows on
    both sides of `mask` inside it (an Above's: at least three rows in `mask`; fewer show no bound): the
    tightest first, then each that narrows what the ones before leave (up to three, joined by "; and ": two
    unrelated bounds say more together than either alone).
    Rows outside `care` and `mask` are left out (rows no mistake of the kind changes: a query that sees one
    key). None when `mask` is empty or every row, or no rule reads it."""
    keep = np.ones(len(mask), bool) if care is None else (care | mask)
    if not mask.any() or mask[keep].all():
        return None
    features = {key: value[keep] for key, value in rows.features.items()}
    mask = mask[keep]
    rules = list(rules)
    for rule in rules:
        if isinstance(rule, Rule):
            if not rule.within and np.array_equal(rule.holds(features), mask):
                return _said(rule, rules, features, lambda holds: np.array_equal(holds, mask))
        elif rule.says is not None:
            for k, above in _thresholds(features, rule):
                if np.array_equal(above, mask):
                    values = features[rule.feature]
                    return rule.says.format_map(_Kept(k=k, below=k, first=int(values[above].min())))
    bounds = []  # (rows inside the bound, its order, what it says, its rows)
    case = rows.index[keep]  # each row's case as a number: a product's rows are a million or more
    cases = int(case.max()) + 1
    of_mask = np.bincount(case[mask], minlength=cases) > 0
    in_mask = of_mask[case]  # the rows of the cases `mask` is in
    one_case = int(of_mask.sum()) == 1
    every = int((np.bincount(case, minlength=cases) > 0).sum())

    def bound(holds: np.ndarray) -> bool:
        """Every row of `mask` inside, a right row too; and where `mask` is one case's, a row of that case outside,
        or rows of a third of the cases at most (a feature the one case shares with most others, its K, its M,
        one its rows all share, bounds it without showing anything; a kind of case few are, one head decoding
        alone, does)."""
        return (not mask[~holds].any() and bool((~mask[holds]).any())
                and (not one_case or bool((~holds[in_mask]).any())
                     or 3 * int((np.bincount(case[holds], minlength=cases) > 0).sum()) <= every))

    for order, rule in enumerate(rules):
        if isinstance(rule, Rule) and rule.within:
            holds = rule.holds(features)
            if bound(holds):  # alike: its family's bounds taking the same rows of the cases `mask` is in
                bounds.append((int(holds.sum()), order, _said(rule, rules, features, lambda other, holds=holds: bound(
                    other) and np.array_equal(other[in_mask], holds[in_mask])), holds))
        elif isinstance(rule, Above) and rule.within is not None and mask.sum() >= 3:
            values = features[rule.feature]
            k = int(values[mask].min()) - 1
            below = values <= k
            if k >= rule.least and below.any() and bound(~below):
                bounds.append((int((~below).sum()), order, rule.within.format_map(
                    _Kept(k=k, off=int(mask.sum()), above=int((~below).sum()), below=int(values[below].max()),
                          first=k + 1)), ~below))
    inside, said = np.ones(len(mask), bool), []
    for _, _, says, holds in sorted(bounds, key=lambda bound: bound[:2]):
        if len(said) < 3 and (inside & ~holds).any():
            inside, said = inside & holds, [*said, says]
    return "; and ".join(said) if said else None


def lanes(rows: Rows, says: str) -> str | None:
    """When the off values of every off row are the same lanes of C, and not all of them: `says` with {lanes}
    (as "32-63") and {C}."""
    bad = rows.bad[rows.off]
    if not len(bad):
        return None
    first = bad[0]
    if first.all() or not (bad == first).all():
        return None
    return says.format(lanes=ranges(np.flatnonzero(first)), C=bad.shape[1])


def factors(rows: Rows) -> np.ndarray:
    """[rows]: each row's c, the least-squares one, where got = c x want holds on the whole row within the
    tolerance (scaled by c when |c| > 1); NaN where no single c does (or the row is all 0)."""
    want, got = rows.want, rows.got
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        c = (got * want).sum(axis=1) / (want * want).sum(axis=1)
        scale = np.maximum(np.abs(c), 1.0)[:, None]
        fits = (np.abs(got - c[:, None] * want) <= scale * rows.allowed).all(axis=1)
    return np.where(fits & np.isfinite(c), c, np.nan)


def sources(rows: Rows, mask: np.ndarray) -> np.ndarray:
    """[rows]: for each row of `mask`, the first other row of its case whose right output it holds (within that
    row's tolerance, and off its own); -1 where it holds none, and outside `mask`."""
    found = np.full(len(mask), -1)
    for name in rows.cases(mask):
        case = np.flatnonzero(rows.case == name)
        want, allowed = rows.want[case], rows.allowed[case]
        for i in np.flatnonzero(mask[case]):
            with np.errstate(invalid="ignore"):
                same = (np.abs(rows.got[case[i]] - want) <= allowed).all(axis=1)
            same[i] = False
            if same.any():
                found[case[i]] = case[int(np.argmax(same))]
    return found


def relocated(rows: Rows, mask: np.ndarray, coords: Iterable[tuple[str, str]], units: tuple[str, str], place: str
              ) -> tuple[str, np.ndarray] | None:
    """When rows of `mask` hold other rows' right outputs in a pattern: the line that says which hold whose, told by
    `coords` ((feature, word), as ("b", "sequence")), and the rows it holds on. `units` ("query", "queries"):
    "every off query holds another query's right output: sequence 0 holds sequence 1's (the same head and query):
    {place}", or "query i holds query i + 1's". A pattern: a fifth of `mask`'s rows or more (at least two), each
    coordinate the same, one source for all, or one shift for most, and in each case one source a value. Else None:
    a few rows that hold another's by chance (a softmax so peaked that a row is one value row) say nothing."""
    found = sources(rows, mask)
    moved = found >= 0
    if moved.sum() < max(2, 0.2 * mask.sum()):
        return None
    to, source = np.flatnonzero(moved), found[moved]
    differ, same = [], []
    for feature, word in coords:
        d, s = rows.features[feature][to], rows.features[feature][source]
        pairs = set(zip(rows.case[to].tolist(), d.tolist(), s.tolist()))
        if len(pairs) != len({(case, a) for case, a, _ in pairs}):
            return None  # a value whose rows hold several values' outputs: no pattern
        if (d == s).all():
            same.append(word)
        elif np.unique(s).size == 1:
            differ.append(f"{word} {d[0]} holds {word} {s[0]}'s" if np.unique(d).size == 1 else
                          f"{word}s {ranges(np.unique(d))} hold {word} {s[0]}'s")
        else:
            steps, counts = np.unique(s - d, return_counts=True)
            step = int(steps[np.argmax(counts)])  # the most common shift, said with the rows it misses
            if step == 0 or 2 * counts.max() < len(d):
                return None
            others = sorted(set(zip(d[s - d != step].tolist(), s[s - d != step].tolist())))
            listed = ", ".join(f"{a} holds {b}'s" for a, b in others[:6]) + (", ..." if len(others) > 6 else "")
            differ.append(f"{word} i holds {word} i {'+' if step > 0 else '-'} {abs(step)}'s"
                          + (f" ({word} {listed})" if others else ""))
    if not differ:  # rows the coordinates do not tell apart: nothing to say in them
        return None
    alike = f" (the same {' and '.join(same)})" if same else ""
    one, many = units
    n, m = moved.sum(), mask.sum()
    held = f"every off {one} holds" if n == m else f"{n} of the {m} off {many} hold"
    return f"{held} another {one}'s right output: {'; '.join(differ)}{alike}: {place}", moved


@dataclass(frozen=True)
class Dimension:
    """A number of each case a factor may follow: `name` as the learner's code knows it ("H"), what it is
    ("the heads, dimension 1 of q"), and the feature holding it."""

    name: str
    meaning: str
    feature: str


POWERS = ((-1.0, "1 / {d}"), (-0.5, "1 / sqrt({d})"), (1.0, "{d}"), (0.5, "sqrt({d})"))


def follows(c: np.ndarray, features: dict[str, np.ndarray], dimensions: Iterable[Dimension],
            base: float = 1.0) -> tuple[str, Dimension] | None:
    """When the numbers `c` (one a case) are base x d^p for one dimension d (`features`: its value on each
    case) and one power p on every case: (that power of d in words, "1 / sqrt(H)", and d); else None."""
    for dim in dimensions:
        d = np.asarray(features[dim.feature], np.float64)
        if np.unique(d).size < 2:
            continue  # a dimension the same on every case cannot be told from a constant
        for p, word in POWERS:
            with np.errstate(divide="ignore", invalid="ignore"):
                power = base * d ** p
            if np.allclose(c, power, rtol=2e-3):
                return word.format(d=dim.name), dim
    return None


@dataclass(frozen=True)
class Variant:
    """The reference computed otherwise: `says` what the learner's kernel would then have read or done,
    `compute(name)` its output for one case (shaped as the learner's), `mistake` the catalogue's entry when it
    is one."""

    says: str
    compute: Callable[[str], np.ndarray]
    mistake: object | None = None


def variant_of_rows(rows: Rows, mask: np.ndarray, outputs: Iterable[tuple[Variant, np.ndarray]]) -> Variant | None:
    """The first variant whose rows (`outputs`: each variant with its output [rows, C] in `rows`' order) equal the
    learner's on every row of `mask` (NaN where it has NaN) and are off the reference there: what those rows
    computed, when no variant computes every row (a way through the kernel that only some rows take)."""
    if not mask.any():
        return None
    got, want, allowed = rows.got[mask], rows.want[mask], rows.allowed[mask]
    for variant, computed in outputs:
        out = computed[mask]
        with np.errstate(invalid="ignore"):
            same = (np.abs(got - out) <= allowed) | (np.isnan(got) & np.isnan(out))
            apart = ~(np.abs(out - want) <= allowed)
        if same.all() and np.isfinite(out).any() and apart.any(axis=1).all():
            return variant
    return None


def first_variant(names: list[str], got: dict[str, np.ndarray], variants: Iterable[Variant], tol: Tolerance,
                  axes: tuple[str, ...]) -> Variant | None:
    """The first variant whose output equals the learner's on every case (NaN where it has NaN), or None. A
    variant that computes no finite value on any case tells nothing (it equals every output that is NaN
    throughout) and is passed over."""
    for variant in variants:
        outputs = {name: np.asarray(variant.compute(name), np.float64) for name in names}
        if any(np.isfinite(out).any() for out in outputs.values()) and all(
                compare(got[name].astype(np.float64), outputs[name], axes=axes, mistakes=[], tol=tol).ok
                for name in names):
            return variant
    return None
