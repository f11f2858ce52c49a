"""Step 16: the check on the solution and the skeleton; the quality bound against broken quantisers; a tie
that float rounding tips; the int8 kernel's mistakes named from their outputs; the bytes a decode step reads."""

import os

import numpy as np
import pytest

from checker.reporting.report import FAIL, PASS, SKIP, TODO
from checker.running.mojo import SEED, case_arrays, kernel_args
from checker.steps.step15 import decode as step15_decode
from checker.steps.step15 import reference as step15_reference
from checker.steps.step16 import check as step16
from checker.steps.step16 import decode as step16_decode
from checker.steps.step16 import kernel as step16_kernel
from checker.steps.step16 import mistakes as step16_mistakes
from checker.steps.step16 import quantize as step16_quantize
from runtime import quantize as ref
from runtime.bandwidth import int8_bytes_per_token
from runtime.learner import import_step
from runtime.paths import REPO
from tests.conftest import (
    STANDINS,
    add_kernel,
    assert_passes_with_margin,
    mutate,
    solution_source,
    with_mistake,
    write_kernel_step,
)


class _Run:
    """What a part needs of StepRun: the learner's calls made, the parts kept."""

    def __init__(self):
        self.parts = []

    def call(self, fn, *args, **kwargs):
        return fn(*args, **kwargs)

    def add(self, part):
        self.parts.append(part)
        return part


def _with(step_folder, mistake: str | None):
    """Solution 16 with one catalogued mistake of its Python made (None: as it is), imported."""
    source = solution_source("16")
    if mistake is not None:
        source = with_mistake("16", mistake)
    path = step_folder / "step_16.py"
    path.write_text(source)
    return import_step(path, f"_step16_{mistake or 'right'}".replace("-", "_"))


@pytest.mark.heavy
@pytest.mark.xdist_group("step16-solution")  # one worker: the second stand-in reuses the first's compiles
@pytest.mark.parametrize("standin", STANDINS)
def test_solution_passes_with_margin(checkpoints, record_property, step_folder, standin):
    path = step_folder / "step_16.py"
    path.write_text(solution_source("16"))
    add_kernel(path, "16")
    report = step16.check(path, checkpoints[standin])
    assert_passes_with_margin(report, "16", standin, record_property)
    assert "as fast on int8 weights" in report.part("timing").summary, report.render()


@pytest.mark.heavy
def test_skeleton_is_todo(checkpoints):
    report = step16.check(REPO / "steps" / "step_16.py", checkpoints["synthetic"])
    assert report.part("quantize").status == TODO and report.part("dequantize").status == TODO, report.render()
    assert report.part("kernel").status == SKIP, report.render()


@pytest.mark.heavy
def test_skeleton_kernel_behind_a_finished_python_is_todo_with_mojos_words(checkpoints, step_folder):
    mojo = (REPO / "steps" / "step_16_kernel" / "matvec_q8.mojo").read_text()
    report = step16.check(write_kernel_step(step_folder, mojo, "16"), checkpoints["synthetic"])
    kernel = report.part("kernel")
    assert kernel.status == TODO, report.render()
    assert "your Mojo kernel gpt2_matvec_q8 raised: step 16: not implemented yet" in kernel.summary, kernel.summary


@pytest.mark.slow
@pytest.mark.parametrize("standin", STANDINS)
def test_the_quality_bound_fails_broken_quantisers_and_passes_the_right_one(checkpoints, step_folder, standin):
    for mistake in (None, "one-scale-per-tensor", "one-scale-per-row", "truncated", "floored", "scale-over-128",
                    "scales-tiled"):
        step = _with(step_folder, mistake)
        run = _Run()
        part = step16_decode.quality_part(run, step.quantize, step.dequantize, checkpoints[standin])
        assert part.status == (PASS if mistake is None else FAIL), (mistake, part.summary)
        assert "mean KL(float32 || int8)" in part.summary and "top-1 agreement" in part.summary


@pytest.mark.slow
def test_scales_off_with_q_are_said_first_to_look_at(checkpoints, step_folder):
    """Scales from max(w), not max |w|: q is off, and so are the scales it is divided by; the report says to
    look at the scales first (q = w / scale), not only that q differs."""
    path = step_folder / "step_16.py"
    path.write_text(mutate(solution_source("16"), "scales = np.abs(grouped).max(axis=-1)",
                           "scales = grouped.max(axis=-1)"))
    add_kernel(path, "16")
    report = step16.check(path, checkpoints["synthetic"])
    quantize, text = report.part("quantize"), report.render()
    assert quantize.status == FAIL and "its q:" in text, text
    assert "its scales are off too" in text and "look at the scales first" in text, text


def test_a_tie_that_float_rounding_tips_is_allowed_and_nothing_else(checkpoint):
    cases = step16_quantize.quantize_cases(checkpoint)
    name, w = "w [2, 100]", cases["w [2, 100]"].copy()
    q, scales = ref.quantize(w)
    w[0, 3] = (np.float64(q[0, 3]) + 0.5) * scales[0, 0]  # exactly half a step: either rounding is right
    cases = {name: w}

    def tipped(weights):
        q, s = ref.quantize(weights)
        q = q.copy()
        q[0, 3] += 1 if q[0, 3] < 127 else -1
        return q, s

    tie = w[0, 3] / scales[0, 0]
    if abs(abs(tie - np.trunc(tie)) - 0.5) < 1e-4:
        assert step16_quantize.quantize_part(_Run(), tipped, cases).status == PASS
    w[0, 3] = q[0, 3] * scales[0, 0]  # on a level: only one rounding is right
    assert step16_quantize.quantize_part(_Run(), tipped, {name: w}).status == FAIL


def test_ties_rounded_by_another_rule_fail_and_say_which(checkpoint):
    """Exact ties (w / scale = k + 0.5) all rounded half up: a rule, not float rounding; named, and failed. The same
    ties tipped one way and another (as a division by a reciprocal may) pass."""
    w = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    w[:, 0] = 12.7  # each row's blocks scaled by 0.1 (the first) ...
    w[:, 32] = 127.0  # ... and by 1 (the second), so k + 0.5 is exact in float32
    w[:, 33:41] = np.array([0.5, 2.5, -1.5, -3.5, 4.5, 6.5, -0.5, 10.5], np.float32)
    cases = {"ties": w}
    evens = ref.quantize(w)

    def half_up(weights):
        q, s = ref.quantize(weights)
        ratio = weights[:, 32:] / s[:, 1:2]
        q[:, 32:] = np.floor(ratio + 0.5).astype(np.int8)
        return q, s

    part = step16_quantize.quantize_part(_Run(), half_up, cases)
    assert part.status == FAIL and "half up" in part.summary and "np.rint" in part.summary, part.summary

    def now_and_then(weights):  # two of the ties tipped up, the others to even: no one rule
        q, s = evens[0].copy(), evens[1]
        q[0, 33] += 1  # 0.5: 1, not 0
        q[0, 35] += 1  # -1.5: -1, not -2
        return q, s

    assert step16_quantize.quantize_part(_Run(), now_and_then, cases).status == PASS

    def past_the_neighbours(weights):  # a tie's q 1 off its even rounding, but on neither side of the tie
        q, s = evens[0].copy(), evens[1]
        q[0, 35] -= 1  # -1.5: -3
        return q, s

    assert step16_quantize.quantize_part(_Run(), past_the_neighbours, cases).status == FAIL


def test_each_kernel_mistake_is_named_from_its_outputs(checkpoint):
    """KERNEL_MISTAKES on every case's arrays: the outputs each computes are named as it, and the right ones pass."""
    cases = step15_reference.kernel_cases(checkpoint.learner_config())
    arrays = {}
    for name, n, k, m, bias in cases:
        x, q, s, *b = kernel_args("matvec_q8", *case_arrays(n, k, m, bias, SEED))
        arrays[name] = (x, q, s, b[0] if b else None)
    for mistake, computes in step16_mistakes.KERNEL_MISTAKES:
        for compute in computes:
            results = {name: compute(*args)[None].astype(np.float32) for name, args in arrays.items()}
            part = step16_kernel.kernel_verdict(cases, results, arrays)
            assert part.status == FAIL and part.mistake.id == mistake.id, (mistake.id, part)
    right = {name: step15_reference.expected(x, ref.dequantize(q, s), b)[None].astype(np.float32)
             for name, (x, q, s, b) in arrays.items()}
    part = step16_kernel.kernel_verdict(cases, right, arrays)
    assert part.status == PASS, part


def test_int8_bytes_per_token_counts_a_byte_a_weight_and_a_scale_per_block():
    """Against a count of GPT-2 small's parameters from transformers: the four products of each block and the
    head at 1 + 4 / 32 bytes a weight, everything else a decode step reads (biases, LayerNorms) at 4."""
    from transformers import GPT2Config

    from runtime.bandwidth import weight_bytes_per_token
    from runtime.checkpoints import learner_config

    config = learner_config(GPT2Config().to_dict())
    c, inner = config.n_embd, config.n_inner or 4 * config.n_embd
    weights = config.n_layer * (c * 3 * c + c * c + c * inner + inner * c) + config.vocab_size * c
    rest = weight_bytes_per_token(config) - 4 * weights
    assert int8_bytes_per_token(config) == weights + weights * 4 // ref.BLOCK + rest
    assert 3.4 < weight_bytes_per_token(config) / int8_bytes_per_token(config) < 3.6


def test_a_read_outside_an_input_shows_as_nan_and_is_said():
    """The probe's inputs sit in buffers with NaN on each side (ints: their largest value), so a kernel reading
    one scale too many (a tail block when K is a multiple of 32) or index -1 gives NaN, and the kernel part says
    what that means in step 16's terms."""
    from checker.running.mojo import GUARD, guarded

    x = guarded(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert np.array_equal(x, np.arange(6).reshape(2, 3))
    assert np.isnan(x.base[:GUARD]).all() and np.isnan(x.base[GUARD + 6:]).all() and len(x.base) == 6 + 2 * GUARD
    ints = guarded(np.zeros((2, 3), np.int8)).base
    assert (ints[:GUARD] == 127).all() and (ints[GUARD + 6:] == 127).all()
    cases = [("x [1, 64] w [3, 64]", 1, 64, 3, True)]
    x, q, s, b = kernel_args("matvec_q8", *case_arrays(1, 64, 3, True, SEED))
    y = step15_reference.expected(x, ref.dequantize(q, s), b)
    y[0, -1] = np.nan  # the last row read its scale past the end
    part = step16_kernel.kernel_verdict(cases, {cases[0][0]: y[None].astype(np.float32)}, {cases[0][0]: (x, q, s, b)})
    said = " ".join(part.details)
    assert part.status == FAIL and "reads outside a tensor" in said and "K is a multiple of 32" in said


def test_a_timing_says_when_other_programs_shared_the_cpu():
    """Steps 15-16 time decode in the learner's check: a busy machine gives low, varying rates, and the report
    says so (measured from /proc/stat, this process's own time taken out), and says nothing when idle."""
    import subprocess
    import sys
    import time

    from runtime.bandwidth import busy_note, others_busy

    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        with others_busy() as busy:
            time.sleep(1.5)
    finally:
        spinner.kill()
    cores = os.cpu_count() or 1
    assert busy[0] >= 0.7 / cores, busy  # one core of `cores` spun the whole time
    assert "other programs used" in busy_note([max(busy[0], 0.2)])[0] and busy_note([0.05]) == []


def test_a_timing_waits_until_the_threads_before_it_are_quiet():
    """A runtime's threads spin after their work (MAX's about half a second), taking the CPU from a timing
    that follows in the same process: settled() waits while a thread of this process spins, and not after."""
    import threading
    import time

    from runtime.bandwidth import settled

    def spin(until):
        while time.perf_counter() < until:
            pass

    spinner = threading.Thread(target=spin, args=(time.perf_counter() + 0.6,))
    spinner.start()
    waited = settled()
    spinner.join()
    assert 0.5 <= waited < 2.0, waited  # it waited for the spinner, and stopped once it was done
    assert settled() < 0.3  # nothing spins now: it returns after one window
    spinner = threading.Thread(target=spin, args=(time.perf_counter() + 1.5,))
    spinner.start()
    waited = settled(at_most=0.3)
    spinner.join()
    assert 0.3 <= waited < 0.6, waited  # a process that never goes quiet is waited for at most at_most


def test_a_decode_step_without_a_product_names_it():
    """The kernel's calls are counted by their weight's shape: a product left in float is named, not only
    counted (48 of 49 calls: the tied head), over one decode step or several."""
    from transformers import GPT2Config

    from runtime.checkpoints import learner_config

    config = learner_config(GPT2Config().to_dict())
    c, v, op = config.n_embd, config.vocab_size, "gpt2_matvec_q8"
    block = [(op, (3 * c, c)), (op, (c, c)), (op, (4 * c, c)), (op, (c, 4 * c))]
    step = block * config.n_layer + [(op, (v, c))]
    assert step15_decode.kernel_calls_problem(step * 2 + [("other_op", (1, 1))], op, config) is None
    cut = [call for call in step if call[1] != (3 * c, c)] + [(op, (c, c))] * 3 * config.n_layer  # c_attn as q, k, v
    assert step15_decode.kernel_calls_problem(cut * 2, op, config) is None
    assert step15_decode.kernel_calls_problem(cut[:-1], op, config).startswith("a decode step calls your kernel")
    headless = step15_decode.kernel_calls_problem((step[:-1]) * 2, op, config)
    assert headless.startswith(f"a decode step calls your kernel {4 * config.n_layer} times, {4 * config.n_layer + 1}")
    assert "the tied head 0 times a step, 1 expected (not through your kernel)" in headless
    one_fc = step15_decode.kernel_calls_problem([call for call in step if call[1] != (4 * c, c)] + [(op, (4 * c, c))],
                                                op, config)
    assert one_fc.endswith(f"by product: c_fc 1 times a step, {config.n_layer} expected")



def test_scales_made_of_another_statistic_are_told_by_it():
    """Scales that are max w / 127 of each block (the abs missing), or max |w| / 100, are told by the statistic
    and the divisor they are, on every weight; the reference's max |w| / 127 gives no reading."""
    rng = np.random.default_rng(0)
    cases = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in (("a", (3, 45)), ("b", (2, 100)))}

    def per_block(statistic, c):
        return {name: np.stack([statistic(w[:, j * 32:(j + 1) * 32]) for j in range(-(-w.shape[1] // 32))], 1) / c
                for name, w in cases.items()}

    said = step16_quantize.scales_read(cases, per_block(lambda g: g.max(-1), 127))
    assert said.startswith("your scales are max w / 127 of each block of 32") and "the abs is missing" in said, said
    said = step16_quantize.scales_read(cases, per_block(lambda g: np.abs(g).max(-1), 100))
    assert said.startswith("your scales are max |w| / 100 of each block"), said
    assert step16_quantize.scales_read(cases, {n: ref.quantize(w)[1] for n, w in cases.items()}) is None
