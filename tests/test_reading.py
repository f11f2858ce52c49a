"""checker/diagnosis/reading.py: a rule read only when it holds on every row, the tightest bound (with those
that narrow it), a factor only where one number fits a whole row, a power of a dimension only when it holds
on every case, a variant only when it computes every case, and a row holding another's output told by
their coordinates."""

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
from checker.reporting.compare import Tolerance

TOL = Tolerance(1e-4, 1e-4)


def _rows(got: np.ndarray, want: np.ndarray, **features) -> Rows:
    """One case of rows [R, C], each feature one number a row."""
    return Rows.of([("case", got, want, features)], TOL)


def test_a_rule_is_read_only_when_the_off_rows_are_exactly_its_rows():
    want = np.ones((6, 4))
    got = want.copy()
    got[3:] += 1  # rows 3, 4, 5 off
    rows = _rows(got, want, t=np.arange(6), last=np.array([0, 0, 0, 0, 0, 1]))
    rules = [Rule(lambda f: f["last"] == 1, "only the last"), Above("t", "after {k}")]
    assert read(rows, rows.off, rules) == "after 2"
    assert read(rows, rows.off, rules[:1]) is None  # the last row alone is not what is off
    assert read(rows, np.zeros(6, bool), rules) is None  # nothing off: nothing to read
    assert read(rows, np.ones(6, bool), rules) is None  # everything off: no rule tells it


def test_the_tightest_bound_is_said_and_a_bound_needs_both_sides():
    want = np.ones((8, 2))
    got = want.copy()
    got[7] += 1  # row 7 alone off
    rows = _rows(got, want, t=np.arange(8), wide=np.array([0, 0, 0, 0, 1, 1, 1, 1]),
                 narrow=np.array([0, 0, 0, 0, 0, 0, 1, 1]))
    rules = [Rule(lambda f: f["wide"] == 1, "within wide", within=True),
             Rule(lambda f: f["narrow"] == 1, "within narrow", within=True)]
    assert read(rows, rows.off, rules) == "within narrow"
    # a bound with every row inside it off is no bound: it is exact, and this rule is not
    assert read(rows, rows.features["narrow"] == 1, [Rule(lambda f: f["narrow"] == 1, "within", within=True)]) is None
    # an Above's bound needs three rows off
    assert read(rows, rows.off, [Above("t", None, within="above {k}")]) is None
    got[5:] += 1
    rows = _rows(got, want, t=np.arange(8))
    assert read(rows, rows.off, [Above("t", None, within="right up to {k}, {off} of {above}")]) is None  # exact
    got[6] -= 1  # rows 5, 7 off, row 6 right
    got[4] += 1
    rows = _rows(got, want, t=np.arange(8))
    assert read(rows, rows.off, [Above("t", None, within="right up to {k}, {off} of {above}")]) == \
        "right up to 3, 3 of 4"


def test_an_above_on_sparse_values_names_the_values_either_side_of_its_bound():
    """Values 1, 2, 7, 13, 16 (numbers of rows a product was tried on): off from 13 on, exactly or within, is a
    bound somewhere from 8 to 13, and the reading can say so ({below}, {first}), where {k} says 7 or 12."""
    want = np.ones((5, 2))
    got = want.copy()
    got[3:] += 1  # 13 and 16 off
    rows = _rows(got, want, M=np.array([1, 2, 7, 13, 16]))
    assert read(rows, rows.off, [Above("M", "k {k}, below {below}, first {first}")]) == "k 7, below 7, first 13"
    got = np.ones((7, 2))
    got[[3, 5, 6]] += 1  # 13, 64 and 100 off, 16 right (a bound needs three rows off)
    rows = _rows(got, np.ones((7, 2)), M=np.array([1, 2, 7, 13, 16, 64, 100]))
    assert read(rows, rows.off, [Above("M", None, within="k {k}, below {below}, first {first}")]) == \
        "k 12, below 7, first 13"


def test_bounds_that_narrow_each_other_are_said_together():
    """Off rows among the odd ones and among the late ones: both said, the tightest first; a bound the
    others already imply adds nothing."""
    want = np.ones((8, 2))
    got = want.copy()
    got[[5, 7]] += 1
    rows = _rows(got, want, t=np.arange(8), odd=np.arange(8) % 2, late=(np.arange(8) >= 4) * 1,
                 odd_or_late=((np.arange(8) % 2 == 1) | (np.arange(8) >= 4)) * 1)
    rules = [Rule(lambda f: f["odd_or_late"] == 1, "odd or late", within=True),
             Rule(lambda f: f["odd"] == 1, "odd", within=True), Rule(lambda f: f["late"] == 1, "late", within=True)]
    assert read(rows, rows.off, rules) == "odd; and late"
    assert read(rows, rows.off, rules[:2]) == "odd"


def test_rows_outside_care_are_left_out():
    want = np.ones((4, 2))
    got = want.copy()
    got[2:] += 1
    rows = _rows(got, want, t=np.array([0, 1, 2, 3]), even=np.array([1, 0, 1, 0]))
    rule = [Rule(lambda f: f["t"] >= 1, "from 1")]
    assert read(rows, rows.off, rule) is None
    assert read(rows, rows.off, rule, care=np.array([True, False, True, True])) == "from 1"


def test_a_factor_is_read_only_where_one_number_fits_the_whole_row():
    want = np.arange(1, 13, dtype=np.float64).reshape(3, 4)
    got = want * np.array([[2.0], [0.5], [1.0]])
    got[2, 0] += 1  # row 2: no single factor
    c = factors(_rows(got, want))
    assert np.allclose(c[:2], [2.0, 0.5]) and np.isnan(c[2])
    huge = want * 1e20  # a factor far above 1 is held to the tolerance scaled by it
    assert np.allclose(factors(_rows(huge, want)), 1e20)


def test_a_power_of_a_dimension_holds_on_every_case_or_is_not_said():
    dims = [Dimension("H", "the heads", "H"), Dimension("T", "the positions", "T")]
    features = {"H": np.array([1, 2, 12]), "T": np.array([5, 5, 5])}
    assert follows(1 / np.sqrt(np.array([1, 2, 12])), features, dims)[0] == "1 / sqrt(H)"
    assert follows(np.array([1, 2, 13.0]), features, dims) is None
    assert follows(np.array([5.0, 5, 5]), features, dims) is None  # T is the same on every case: a constant


def test_lanes_are_read_when_every_off_row_is_off_on_the_same_lanes():
    want = np.ones((3, 8))
    got = want.copy()
    got[:2, 6:] += 1
    assert lanes(_rows(got, want), "{lanes} of {C}") == "6-7 of 8"
    got[1, 0] += 1
    assert lanes(_rows(got, want), "{lanes} of {C}") is None


COORDS = (("b", "b"), ("t", "t"))


def test_rows_holding_other_rows_outputs_are_told_by_their_coordinates():
    """Row (b, t) holding (b + 1, t)'s output is "b 0 holds b 1's (the same t)"; rows shifted by one t are "t i
    holds t i + 1's"; a row holding no row's output is left out, and none holding one gives None."""
    rng = np.random.default_rng(0)
    want = rng.standard_normal((6, 4))  # rows (b, t): b = 0, 1; t = 0, 1, 2
    b, t = np.repeat([0, 1], 3), np.tile([0, 1, 2], 2)
    got = want.copy()
    got[:3] = want[3:]  # sequence 0 holds sequence 1's
    got[5] += 1  # off, and no row's
    rows = _rows(got, want, b=b, t=t)
    said, held = relocated(rows, rows.off, COORDS, ("row", "rows"), "PLACE")
    assert said == "3 of the 4 off rows hold another row's right output: b 0 holds b 1's (the same t): PLACE", said
    assert held.tolist() == [True] * 3 + [False] * 3
    shifted = want.copy()
    shifted[[0, 1, 3, 4]] = want[[1, 2, 4, 5]]
    rows = _rows(shifted, want, b=b, t=t)
    assert relocated(rows, rows.off, COORDS, ("row", "rows"), "PLACE")[0] == (
        "every off row holds another row's right output: t i holds t i + 1's (the same b): PLACE")
    rows = _rows(want + 1, want, b=b, t=t)
    assert relocated(rows, rows.off, COORDS, ("row", "rows"), "PLACE") is None


def test_the_first_variant_that_computes_every_case_is_named():
    want = {"a": np.ones(4), "b": np.full(4, 2.0)}
    twice = Variant("twice", lambda name: 2 * want[name])
    plus = Variant("plus one", lambda name: want[name] + 1)
    got = {"a": np.full(4, 2.0), "b": np.full(4, 3.0)}  # plus one on both, twice on "a" alone
    assert first_variant(["a", "b"], got, [twice, plus], TOL, ("",)) is plus
    assert first_variant(["a", "b"], {"a": got["a"], "b": np.zeros(4)}, [twice, plus], TOL, ("",)) is None
