"""Steps 15 and 16's products read from what they computed (checker/steps/step15/reading.py and the judge's
dimension), on outputs made in numpy from each kernel case's arrays: no Mojo runs, the default tier."""

import numpy as np
import pytest

from checker.running.mojo import SEED, case_arrays, kernel_args
from checker.steps.step15 import judge as step15_judge
from checker.steps.step15 import reference as step15_reference
from runtime import quantize as ref
from tests.test_step15 import _fake_results


def _read(config, wrong):
    """What the product readings say of the outputs `wrong(x, w, b, y)` makes, and the mistake they name."""
    from checker.steps.step15.reading import readings

    cases, results, arrays = _fake_results(config, wrong)
    lines, mistake = readings(cases, {name: np.stack(r) for name, r in results.items()}, arrays,
                              step15_judge.BIAS_COUNTS)
    return " ".join(lines), mistake


def test_a_bias_added_once_per_column_of_the_tail_is_told_by_its_count(checkpoint):
    """b added inside the tail's loop: K % 8 times, told as the count it follows; the catalogue's counts (0, 2)
    named by the same reading, and the bias added once not read at all."""
    said, _ = _read(checkpoint.learner_config(), lambda x, w, b, y: y if b is None else y + (x.shape[1] % 8 - 1) * b)
    assert "the bias is added K % 8 times" in said and "5 on K = 37" in said, said
    for count, mistake in ((0, "bias-missing"), (2, "bias-twice")):
        _, named = _read(checkpoint.learner_config(), lambda x, w, b, y: y if b is None else y + (count - 1) * b)
        assert named is not None and named.id == mistake
    assert _read(checkpoint.learner_config(), lambda x, w, b, y: y) == ("", None)


def test_a_bias_read_at_another_index_is_told_as_that_index(checkpoint):
    def first_of_four(x, w, b, y):
        if b is None:
            return y
        m = np.arange(len(b))
        return y - b + b[m - m % 4]
    said, _ = _read(checkpoint.learner_config(), first_of_four)
    assert "adds the bias b[m - m % 4 (the first of each group of 4)], not b[m]" in said, said


def test_outputs_off_in_a_repeating_pattern_are_told_by_its_period(checkpoint):
    """Every second pass of four rows off (an accumulator carried over): a period of 8 along M, residues 4-7."""
    def second_pass(x, w, b, y):
        y = y.copy()
        y[0, (np.arange(y.shape[1]) % 8) >= 4] += 1.0
        return y
    said = " ".join(step15_judge.dimension(*_fake_results(checkpoint.learner_config(), second_pass)))
    assert "repeats every 8 along M" in said and "m % 8 is 4-7" in said, said


@pytest.mark.parametrize("tasks", [8, 2])
def test_one_output_in_each_tasks_run_is_told_as_a_tasks_range(checkpoint, tasks):
    """The last output of each run of ceil(N * M / tasks) never written: one in each run off, the last. With a
    task a core, two on two cores: most shapes then show one output off alone (the last run ends at N * M)."""
    def short(x, w, b, y):
        y = y.copy().reshape(-1)
        run = -(-y.size // tasks)
        y[np.arange(y.size) % run == run - 1] = 1e30
        return y.reshape(len(x), -1)
    said = " ".join(step15_judge.dimension(*_fake_results(checkpoint.learner_config(), short)))
    assert "the last of each run" in said and "ends (one short)" in said, said


def test_one_output_off_alone_is_a_tasks_range_only_where_runs_could_end_there(checkpoint):
    """y[N * M // 2] off on every shape: on a few it is where the first of two runs ends, on the others (N * M
    even) one past it, which no number of runs puts there: not told as a task's range."""
    def middle(x, w, b, y):
        y = y.copy().reshape(-1)
        y[y.size // 2] = 1e30
        return y.reshape(len(x), -1)
    said = " ".join(step15_judge.dimension(*_fake_results(checkpoint.learner_config(), middle)))
    assert "task's range" not in said, said


def _int8_read(config, dequantized) -> list[str]:
    """What the readings say of an int8 kernel whose outputs are x @ dequantized(q, scales, K).T + b on every
    case (the scales and q as the check hands them)."""
    from checker.steps.step15.reading import readings

    cases = step15_reference.kernel_cases(config)
    packed, arrays, results = {}, {}, {}
    for name, n, k, m, bias in cases:
        x, q, s, *b = kernel_args("matvec_q8", *case_arrays(n, k, m, bias, SEED))
        packed[name] = (x, q, s, b[0] if b else None)
        arrays[name] = (x, ref.dequantize(q, s), packed[name][3])
        results[name] = step15_reference.expected(x, dequantized(q, s, k), packed[name][3])[None].astype(np.float32)
    return readings(cases, results, arrays, {}, packed)[0]


@pytest.mark.parametrize("words, scale", [
    ("scales read as if they were [KB, M]", lambda s, k: s.reshape(-1).reshape(s.shape[1], s.shape[0]).T),
    ("each whole block of a row multiplied by block 0's scale",  # the partial block by its own
     lambda s, k: np.where(np.arange(s.shape[1]) < k // 32, s[:, :1], s)),
    ("multiplied by 1 / scale", lambda s, k: 1 / s),
])
def test_blocks_scaled_by_another_scale_are_told_by_which(checkpoint, words, scale):
    """An int8 kernel whose blocks are scaled otherwise (the scales read transposed, block 0's for every whole
    block, divided by the scale) is told which scale each block used."""
    lines = _int8_read(checkpoint.learner_config(), lambda q, s, k: ref.dequantize(q, scale(s, k)))
    assert any(words in line for line in lines), lines


def test_q_read_unsigned_in_the_whole_blocks_is_told(checkpoint):
    """int8 read as uint8 in the vector loop over whole blocks only, the partial block's scalar loop right."""
    def unsigned(q, s, k):
        read = q.astype(np.float64)
        whole = read[:, :k // 32 * 32]
        read[:, :k // 32 * 32] = np.where(whole < 0, whole + 256, whole)
        return ref.dequantize(read, s)

    lines = _int8_read(checkpoint.learner_config(), unsigned)
    assert any("q read as unsigned bytes" in line and "in the whole blocks" in line for line in lines), lines


@pytest.mark.parametrize("cores", [2, 3])
def test_bands_sized_for_more_tasks_than_started_are_told_as_two_counts(checkpoint, monkeypatch, cores):
    """Bands of ceil(M / 8) rows rounded up to 4, and only `cores` tasks started (the rest of y left 0): the
    right outputs are the first `cores` bands on every shape, said with both counts; this machine's cores
    named when they are the tasks started."""
    monkeypatch.setattr(step15_judge.os, "cpu_count", lambda: 2)

    def started(x, w, b, y):
        m = y.shape[1]
        band = -(-(-(-m // 8)) // 4) * 4
        y = y.copy()
        y[:, min(m, cores * band):] = 0.0
        return y
    said = " ".join(step15_judge.dimension(*_fake_results(checkpoint.learner_config(), started)))
    assert said.startswith(f"bands of rows of w: on every failing shape only the first {cores} bands of ceil(M / 8) "
                           "rows, rounded up to a multiple of 4, are right"), said
    assert ("2, this machine's count of cores, run" in said) == (cores == 2), said
    assert f"{cores * 8} of M = 53" in said and "bands sized for 8 tasks" in said, said


@pytest.mark.parametrize("stride, said", [(lambda n, k, m: k, "n * K + m"), (lambda n, k, m: m + 1, "n * (M + 1) + m")])
def test_rows_of_y_stored_at_another_stride_are_told_by_it(checkpoint, stride, said):
    """y[n, m] stored at n * S + m (S = K, or M + 1), the later of two rows kept where they overlap, the rest of y
    as memory held it: the stride read from where each right output landed, on every shape with several rows."""
    def stored(x, w, b, y):
        n_rows, m = y.shape
        out = np.full(y.size, 7.0)
        for n in range(n_rows):
            for j in range(m):
                if (at := n * stride(n_rows, x.shape[1], m) + j) < y.size:
                    out[at] = y[n, j]
        return out.reshape(y.shape)
    from checker.steps.step15.reading import store_stride

    cases, results, arrays = _fake_results(checkpoint.learner_config(), stored)
    line = store_stride(cases, {name: np.stack(r) for name, r in results.items()}, arrays)
    assert line is not None and f"each right output y[n, m] lies at {said}" in line, line
    right = _fake_results(checkpoint.learner_config(), lambda x, w, b, y: y)
    assert store_stride(right[0], {name: np.stack(r) for name, r in right[1].items()}, right[2]) is None


def test_the_terms_each_output_summed_are_solved_for(checkpoint):
    """Each output solved as its row's products with each column counted a whole number of times: a tail loop one
    column short is told as the last column left out, a partial block's sum put in place of the whole blocks' as
    every whole block's columns left out; a product that is no such sum is not read."""
    from checker.steps.step15.reading import terms_reading

    def read(wrong, widths=step15_reference.WIDTHS, piece="vector"):
        cases, results, arrays = _fake_results(checkpoint.learner_config(), wrong)
        return terms_reading(cases, {name: np.stack(r) for name, r in results.items()}, arrays, widths, piece)

    def last_column_left_out(x, w, b, y):
        return y - np.outer(x[:, -1], w[:, -1]) if x.shape[1] % 16 else y

    said = read(last_column_left_out)
    assert said is not None and "the last column (K - 1) left out" in said, said

    def whole_blocks_lost(x, w, b, y):
        start = x.shape[1] - x.shape[1] % 32
        return y - x[:, :start] @ w[:, :start].T if 0 < start < x.shape[1] else y

    said = read(whole_blocks_lost, (32,), "block")
    assert said is not None and "every column of the whole blocks of 32" in said and "left out" in said, said
    assert read(lambda x, w, b, y: y * 1.5) is None  # a factor on every output: no whole count per column
