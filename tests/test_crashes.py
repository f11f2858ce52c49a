"""A kernel that crashes on some cases: the cases after a crash still run (checker.running.mojo), and which
cases crash is read by what they share (checker.diagnosis.crashes)."""

from __future__ import annotations

import numpy as np
import pytest

from checker.diagnosis.crashes import RACED, crash_part, crashed_on, shared_by
from checker.reporting.report import FAIL, PASS, Part
from checker.running.mojo import Crashed, run_kernel

WORDS = {"M": "M, the rows of w", "K": "K, the columns"}
FEATURES = {"a": dict(M=11, K=5), "b": dict(M=64, K=37), "c": dict(M=29, K=100), "d": dict(M=768, K=768),
            "e": dict(M=7, K=50), "f": dict(M=2304, K=768)}


def test_the_cases_a_step_leaves_unwhole_are_read_exactly():
    said = shared_by(["a", "c", "e"], FEATURES, WORDS)
    assert said.startswith("it crashed exactly on the cases whose M is odd (M = 7, 11, 29)"), said
    assert "ran every case whose M is even (M = 64, 768, 2304)" in said and "M, the rows of w" in said


def test_a_multiple_and_a_bound_above_are_read_exactly():
    features = {name: dict(M=f["M"] * 2, K=f["K"]) for name, f in FEATURES.items()}  # M = 22, 128, 58, ...
    said = shared_by(["a", "c", "e"], features, WORDS)
    assert "exactly on the cases whose M is no multiple of 4 (M = 14, 22, 58)" in said, said
    assert "in steps of 4, 8, 16, 32, 64 or 128 (these cases cannot tell which)" in said
    said = shared_by(["d", "f"], FEATURES, WORDS)
    assert said.startswith("it crashed exactly on the cases whose M is above 64 (M = 768, 2304)"), said


def test_a_crash_now_and_then_is_read_as_a_bound_only_when_it_leaves_cases_out():
    """A write just past a tensor crashes only now and then: two odd M of three crash, the even ones all ran."""
    said = shared_by(["a", "c"], FEATURES, WORDS)
    assert said.startswith("every case it crashed on has M odd (M = 11, 29), as some it ran do (M = 7)"), said
    assert shared_by(["a"], FEATURES, WORDS) is None  # one crash alone tells no bound
    # crashed cases sharing what all but one case share say nothing
    odd = {name: dict(M=f["M"] + (name in "bf"), K=768) for name, f in FEATURES.items()}  # M odd but on d
    assert shared_by(["a", "c"], odd, WORDS) is None
    assert shared_by(list(FEATURES), FEATURES, WORDS) is None


def test_a_reading_random_crashes_would_get_as_often_is_not_said():
    """Two crashes of ten cases with six dimensions: a dimension splits them off exactly (H above 2), but most
    pairs drawn at random are split off by one too: nothing is said. Five odd M of step 15's nine shapes are
    told."""
    heads = [1, 2, 2, 2, 3, 2, 12, 1, 2, 2]
    features = {f"c{i}": dict(H=h, B=1 + i % 3, T=5 + 7 * i, page=16 * (1 + i % 2), rows=i + 1, cached=9 * i)
                for i, h in enumerate(heads)}
    words = {key: key for key in features["c0"]}
    assert shared_by(["c4", "c6"], features, words).startswith("it crashed exactly on the cases whose H is above 2")
    assert crashed_on(["c4", "c6"], features, words) is None
    shapes = [(1, 37, 53), (1, 50, 7), (2, 5, 11), (3, 100, 29), (1, 768, 2304), (1, 768, 768), (1, 768, 3072),
              (1, 3072, 768), (1, 768, 50257)]
    nine = {f"s{i}": dict(N=n, K=k, M=m) for i, (n, k, m) in enumerate(shapes)}
    odd = [name for name, f in nine.items() if f["M"] % 2]
    assert crashed_on(odd, nine, {"N": "N", "K": "K", "M": "M"}).startswith("it crashed exactly on the cases whose "
                                                                            "M is odd")


def _crash(crashed, results, total=4) -> Crashed:
    return Crashed("crashed", crashed, "SIGSEGV", results, total, "rows of w below M")


def test_the_part_says_where_it_crashed_and_what_it_computed_elsewhere():
    """Which cases crashed, what they share (crashed_on on their dimensions), the indices to check, then the
    judge's part of the others; a race among those said with the crashes."""
    shapes = {"a": 11, "b": 768, "c": 29, "d": 2304, "e": 7, "f": 3072, "g": 53, "h": 64, "i": 50257}
    nine, words = {name: dict(M=m) for name, m in shapes.items()}, {"M": "M, the rows of w"}
    odd = [name for name, m in shapes.items() if m % 2]
    steady = {name: np.ones((3, 2)) for name in shapes if name not in odd}
    part = crash_part("kernel", _crash(odd, steady, 9), nine, words, Part("kernel", PASS, "right"), "shapes")
    assert part.status == FAIL and part.summary.endswith("on 5 of the 9 shapes; right on the 4 it ran"), part
    assert part.details[0] == "crashed on: a; c; e; g; i", part.details
    assert part.details[1].startswith("it crashed exactly on the cases whose M is odd") and "rows of w below M" in \
        part.details[2], part.details
    off = Part("kernel", FAIL, "off on 1 of 2 shapes", ["b: off"], mistake=None)
    part = crash_part("kernel", _crash(["a", "c"], {"b": np.ones((3, 2))}), {}, {}, off, "shapes")
    assert part.summary.endswith("on the 2 it ran, off on 1 of 2 shapes") and part.details[-1] == "b: off"
    assert part.details[0] == "crashed on: a; c" and "rows of w below M" in part.details[1], part.details
    varying = {"b": np.stack([np.ones(2), np.zeros(2)])}
    part = crash_part("kernel", _crash(["a", "c", "d"], varying), {}, {}, off, "shapes")
    assert part.details[1] == RACED, part.details
    part = crash_part("kernel", _crash(["a", "b", "c", "d"], {}), {}, {}, None, "shapes")
    assert part.summary.endswith("on every one of the 4 shapes"), part


def test_the_cases_after_a_crash_run_in_a_new_process(tmp_path):
    """A function that kills its process on the odd sizes: the even ones still run, each once a run, and
    Crashed says which crashed (in the order run) and holds the others' outputs."""
    step = tmp_path / "step_99.py"
    step.write_text("import os, signal\n\n\ndef probe(x):\n    if int(x.shape[0]) % 2:\n"
                    "        os.kill(os.getpid(), signal.SIGSEGV)\n    return x\n")
    arrays = {f"n={n}": [np.full(n, n, np.float32)] for n in (3, 2, 5, 4)}
    with pytest.raises(Crashed) as raised:
        run_kernel(step, "probe", arrays, timeout=300, indices="x below n")
    crash = raised.value
    assert crash.crashed == ["n=3", "n=5"] and crash.signal == "SIGSEGV" and crash.total == 4
    assert sorted(crash.results) == ["n=2", "n=4"] and np.all(crash.results["n=4"] == 4)
    assert "on 2 of the 4 cases: n=3; n=5; it ran the other 2 to the end" in str(crash)


def test_a_case_that_never_returns_is_named(tmp_path):
    """A function that never returns on its third case: the time limit's message says how far it got and which
    case it was still running."""
    from runtime.learner import LearnerError

    step = tmp_path / "step_99.py"
    step.write_text("import time\n\n\ndef probe(x):\n    if int(x.shape[0]) == 5:\n        time.sleep(600)\n"
                    "    return x\n")
    arrays = {f"n={n}": [np.full(n, n, np.float32)] for n in (3, 2, 5, 4)}
    with pytest.raises(LearnerError, match="did not finish the 4 cases in 20 s") as raised:
        run_kernel(step, "probe", arrays, timeout=20, indices="x below n", about={"n=5": "n=5 (x [5])"})
    assert "it had gone through 2 of them and was still running n=5 (x [5])" in str(raised.value), raised.value
