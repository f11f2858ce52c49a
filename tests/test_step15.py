"""Step 15: the Mojo kernel's check on the solution, the skeleton, and kernels that do not compile,
crash or never return; a plain one-task kernel, correct but slow, passes."""

import re

import numpy as np
import pytest

from checker.reporting.report import FAIL, PASS, TODO
from checker.steps.step15 import check as step15
from checker.steps.step15 import judge as step15_judge
from checker.steps.step15 import mistakes as step15_mistakes
from checker.steps.step15 import reference as step15_reference
from runtime.kernels import ROOT
from runtime.paths import REPO
from tests.conftest import STANDINS, assert_passes_with_margin, kernel_source, mutate, write_kernel_step

# The kernel's loop body as one task, one float at a time: what the skeleton suggests starting with.
_SIMPLE = """        for n in range(N):
            for m in range(M):
                var s: Float32 = 0
                for k in range(K):
                    s += wp[unsafe_offset=m * K + k] * xp[unsafe_offset=n * K + k]
                yp[unsafe_offset=n * M + m] = s + bp[unsafe_offset=m]
"""


def _kernel_body(body: str) -> str:
    """The solution's Mojo with execute's body, after the sizes, replaced by `body`."""
    source = kernel_source()
    start = source.index("        # Each task's band of rows")
    return source[:start] + body


@pytest.mark.xdist_group("step15-solution")  # one worker: the second stand-in reuses the first's compiles
@pytest.mark.parametrize("standin", STANDINS)
def test_solution_passes_with_margin(checkpoints, record_property, standin):
    report = step15.check(REPO / "solutions" / "solution_15.py", checkpoints[standin])
    assert_passes_with_margin(report, "15", standin, record_property)
    timing = report.part("timing")
    assert re.search(r"decode \d+\.\d\dx as fast with your kernel", timing.summary), timing.summary
    assert any("GB/s this machine reads now" in line for line in timing.details), timing.details


def test_skeleton_is_todo(checkpoints):
    report = step15.check(REPO / "steps" / "step_15.py", checkpoints["synthetic"])
    assert report.part("kernel").status == TODO, report.render()
    assert "steps/step_15.py" in report.part("kernel").summary


def test_skeleton_kernel_behind_a_finished_python_is_todo_with_mojos_words(checkpoints, step_folder):
    mojo = (REPO / "steps" / "step_15_kernel" / "matvec.mojo").read_text()
    report = step15.check(write_kernel_step(step_folder, mojo), checkpoints["synthetic"])
    kernel = report.part("kernel")
    assert kernel.status == TODO, report.render()
    assert "your Mojo kernel gpt2_matvec raised: step 15: not implemented yet" in kernel.summary
    assert "MLIR" not in report.render() and "Fusion info" not in report.render()


def test_compile_error_names_the_file_line_and_message(checkpoints, step_folder):
    mojo = mutate(kernel_source(), "yp[unsafe_offset=n * M + m + r] = s + bp[unsafe_offset=m + r]",
                  "yp[unsafe_offset=n * M + m + r] = s + bq[unsafe_offset=m + r]")
    path = write_kernel_step(step_folder, mojo)
    report = step15.check(path, checkpoints["synthetic"])
    kernel, text = report.part("kernel"), report.render()
    assert kernel.status == FAIL, text
    line = next(i for i, s in enumerate(mojo.splitlines(), 1) if "bq[" in s)
    assert re.search(rf"matvec\.mojo line {line}: use of unknown declaration 'bq'", kernel.summary), text
    assert "bq[unsafe_offset" in kernel.summary  # Mojo's source line under it
    assert "precompile" not in text and "Crashpad" not in text and "warning" not in text and "Traceback" not in text
    assert str(ROOT) not in text  # the learner's file, not the copy MAX was handed (runtime/kernels.py)


def test_a_kernel_folder_that_is_not_there_is_named(checkpoints, step_folder):
    """custom_extensions naming a folder that does not exist: the check names the folder and says what it
    must hold, not MAX's ValueError."""
    path = write_kernel_step(step_folder, kernel_source())
    path.write_text(mutate(path.read_text(), 'with_name("solution_15_kernel")', 'with_name("my_kernel")'))
    report = step15.check(path, checkpoints["synthetic"])
    kernel, text = report.part("kernel"), report.render()
    assert kernel.status == FAIL, text
    assert "MAX cannot load your kernel from" in kernel.summary and "my_kernel: there is no such folder" in text
    assert "ValueError" not in text and "Traceback" not in text


def test_a_crash_is_a_verdict(checkpoints, step_folder):
    """A write far outside y kills the process that runs the kernel; the check says so and goes on."""
    body = "        for m in range(M):\n            yp[unsafe_offset=m * 1000000000] = 0\n"
    report = step15.check(write_kernel_step(step_folder, _kernel_body(body)), checkpoints["synthetic"])
    kernel = report.part("kernel")
    assert kernel.status == FAIL and "crashed the process that ran it (SIG" in kernel.summary, report.render()


def test_a_crash_on_some_shapes_is_read_by_what_they_share(checkpoints, step_folder):
    """A kernel right on every shape but a write far outside y where M is odd: the other shapes still run (and
    are right), and the crashing ones are told by their M."""
    crash = "        if M % 2 == 1:\n            yp[unsafe_offset=1 << 40] = 0\n"
    mojo = mutate(kernel_source(), "        # Each task's band of rows", crash + "        # Each task's band of rows")
    report = step15.check(write_kernel_step(step_folder, mojo), checkpoints["synthetic"])
    kernel, text = report.part("kernel"), report.render()
    assert kernel.status == FAIL and "(SIGSEGV) on 5 of the 9 shapes; right on the 4 it ran" in kernel.summary, text
    assert any(line.startswith("it crashed exactly on the cases whose M is odd (M = 7, 11, 29, 53, 50257)")
               for line in kernel.details), text


def test_a_kernel_that_never_returns_is_stopped(checkpoints, step_folder, monkeypatch):
    monkeypatch.setattr(step15_judge, "run_probe",
                        lambda path, cases, timeout, function: _probe(path, cases, 60, function))
    body = "        var m = 0\n        while m < M:\n            yp[unsafe_offset=m] = 0\n"
    report = step15.check(write_kernel_step(step_folder, _kernel_body(body)), checkpoints["synthetic"])
    kernel = report.part("kernel")
    assert kernel.status == FAIL and "did not finish" in kernel.summary and "never reaches" in kernel.summary


def _probe(path, cases, timeout, function):
    from checker.running.mojo import run_probe

    return run_probe(path, cases, timeout=timeout, function=function)


def test_a_simple_one_task_kernel_passes(checkpoints, step_folder, untimed):
    """A kernel written the plainest way passes the kernel and decode parts. Its timing report, slow for a
    one-task kernel and never a verdict, is left out here (the solution's test reads it)."""
    report = step15.check(write_kernel_step(step_folder, _kernel_body(_SIMPLE)), checkpoints["synthetic"])
    assert report.part("kernel").status == PASS, report.render()
    assert report.part("decode").status == PASS, report.render()


def test_a_bias_added_several_times_is_named_with_its_count(checkpoints, step_folder):
    """No catalogue entry adds b four times: the count is read from the output, as for a SIMD accumulator
    started at b (once per lane)."""
    body = _SIMPLE.replace("var s: Float32 = 0", "var s: Float32 = 3 * bp[unsafe_offset=m]")
    report = step15.check(write_kernel_step(step_folder, _kernel_body(body)), checkpoints["synthetic"])
    kernel = report.part("kernel")
    assert kernel.status == FAIL and kernel.mistake and kernel.mistake.id == "bias-times", report.render()
    assert "added 4 times" in report.render()


def test_a_wrong_stride_for_y_lists_every_shape_it_breaks(checkpoints, step_folder):
    """Rows of y written at n * (M - 1): the N > 1 shapes overlap and leave outputs unwritten. Every
    shape that is off is listed, and outputs that change from run to run are not blamed on a race alone."""
    body = _SIMPLE.replace("yp[unsafe_offset=n * M + m]", "yp[unsafe_offset=n * (M - 1) + m]")
    report = step15.check(write_kernel_step(step_folder, _kernel_body(body)), checkpoints["synthetic"])
    kernel, text = report.part("kernel"), report.render()
    assert kernel.status == FAIL, text
    assert "x [2, 5] w [11, 5]" in text and "x [3, 100] w [29, 100]" in text, text
    if kernel.mistake is step15_mistakes.RACE:
        assert "never written" in text, text


def test_a_kernel_linear_that_loses_the_position_axis_is_named(checkpoints, step_folder):
    """A KernelLinear returning [B, out] fails where it is, not later inside step 13's cache."""
    source = mutate((REPO / "solutions" / "solution_15.py").read_text(),
                    ".reshape([*x.shape[:-1], self.weight.shape[0]])", "")
    path = write_kernel_step(step_folder, kernel_source())
    path.write_text(source)
    report = step15.check(path, checkpoints["synthetic"])
    decode = report.part("decode")
    assert decode.status == FAIL and "KernelLinear(" in decode.summary, report.render()
    assert "returned shape [2, 2304], [2, 1, 2304] expected" in decode.summary, decode.summary


def _fake_results(config, wrong):
    """Each kernel case's arrays and the outputs `wrong(x, w, b, y)` makes of the right ones (no Mojo run)."""
    from checker.running.mojo import SEED, case_arrays

    cases = step15_reference.kernel_cases(config)
    arrays = {name: case_arrays(n, k, m, bias, SEED) for name, n, k, m, bias in cases}
    results = {name: [wrong(*args, step15_reference.expected(*args)).astype(np.float32)]
               for name, args in arrays.items()}
    return cases, results, arrays


@pytest.mark.parametrize("old, new, where", [
    ("t.wpe(input_ids.shape[-1], cache[0].shape[-2])", "t.wpe(input_ids.shape[-1], 0)",
     "the embeddings: the stream into block 0 is not wte(token) + wpe's row at the token's position"),
    ("            x = x + block.mlp(block.ln_2(x))\n            new_cache",
     "            x = x + block.mlp(block.ln_2(x)) * 0.5\n            new_cache",
     "block 0's MLP half: the MLP's output matches, the stream after it does not"),
])
def test_a_decode_off_outside_the_kernel_is_placed_at_its_piece_and_step(checkpoints, step_folder, old, new, where):
    """Step 15's GPT2WithKernel wrong around a right kernel: the report names the first piece of the decode
    step that differs from Hugging Face, and the decode steps it is off at."""
    path = write_kernel_step(step_folder, kernel_source())
    path.write_text(mutate(path.read_text(), old, new))
    report = step15.check(path, checkpoints["synthetic"])
    decode, text = report.part("decode"), report.render()
    assert report.part("kernel").status == PASS and decode.status == FAIL, text
    assert f"where: everything before matches Hugging Face; {where}" in text, text
    assert "off on the decode steps at positions 9, 10" in text, text
    assert "the cause is outside the kernel" in text, text


@pytest.mark.parametrize("width", [8, 16])
def test_a_dropped_tail_of_k_is_told_by_k_not_by_a_case(checkpoint, width):
    """Off exactly where K is no multiple of the width: said as K's tail, whichever case labels fail (one has
    three rows of x: the rows are not blamed)."""
    def wrong(x, w, b, y):
        whole = x.shape[1] // width * width
        return step15_reference.expected(x[:, :whole] * 1.0, w[:, :whole], b) if whole < x.shape[1] else y
    said = " ".join(step15_judge.dimension(*_fake_results(checkpoint.learner_config(), wrong)))
    assert said.startswith("the tail of K") and "K = 5, 37, 50, 100" in said and "rows of x" not in said, said


def test_wrong_last_outputs_of_m_are_told_as_m(checkpoint):
    def wrong(x, w, b, y):
        y = y.copy()
        if y.shape[1] % 8:
            y[:, -(y.shape[1] % 8):] = 0.0
        return y
    said = " ".join(step15_judge.dimension(*_fake_results(checkpoint.learner_config(), wrong)))
    assert said.startswith("the last outputs of M") and "the last 5 of M = 53" in said, said


def test_every_output_but_the_first_wrong_is_told_as_where_a_row_of_w_starts(checkpoint):
    """Row m of w read from row 0's place but for its first weights (an index without m * K): output 0 of each
    row of y is right, the others off, said as where a row of w starts."""
    def wrong(x, w, b, y):
        return step15_reference.expected(x, np.repeat(w[:1], w.shape[0], axis=0), b)  # every row of w read as row 0

    said = " ".join(step15_judge.dimension(*_fake_results(checkpoint.learner_config(), wrong)))
    assert said.startswith("outputs after the first") and "where row m of w starts" in said, said


def test_wrong_rows_of_x_after_the_first_are_told_as_rows(checkpoint):
    def wrong(x, w, b, y):
        y = y.copy()
        y[1:] += 1.0
        return y
    said = " ".join(step15_judge.dimension(*_fake_results(checkpoint.learner_config(), wrong)))
    assert said.startswith("rows of x after the first") and "x [3, 100] w [29, 100]" in said, said


def test_y_written_transposed_is_told_as_an_index_by_the_row(checkpoint):
    """y[n, m] written at m * N + n: right wherever x has one row, off on every shape with more, row 0 too."""
    def wrong(x, w, b, y):
        return y.T.reshape(-1).reshape(y.shape)  # the cell m * N + n holds y[n, m]
    said = " ".join(step15_judge.dimension(*_fake_results(checkpoint.learner_config(), wrong)))
    assert said.startswith("rows of x: off on every shape with more than one row of x"), said
    assert "x [2, 5] w [11, 5], x [3, 100] w [29, 100]" in said and "n * M" in said, said


def test_noise_everywhere_is_told_by_no_dimension(checkpoint):
    rng = np.random.default_rng(0)
    assert step15_judge.dimension(*_fake_results(checkpoint.learner_config(),
                                           lambda x, w, b, y: y + rng.standard_normal(y.shape))) == []

