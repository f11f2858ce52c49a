"""Each message that once misled a learner, now naming or placing the real cause (one test per case).

The cases are mistakes a learner made while writing the steps from the skeletons and pages; each
once got a verdict that pointed elsewhere (every sub-part "right", a name from a symptom, MAX's raw
error, advice about the wrong part). Also: MAX's refusals to build an op, translated into the
operands' dtypes and shapes and what the op needs.
"""

import re

import numpy as np
import pytest

from checker import registry
from checker.reporting.report import PASS, SKIP, Part, Report
from checker.steps.step12.check import first_difference
from runtime.errors import first_line
from tests.conftest import STANDINS, mutate, solution_source


def _check(write_step, checkpoint, step: str, *edits: tuple[str, str]):
    source = solution_source(step)
    for old, new in edits:
        source = mutate(source, old, new)
    report = registry.step(step).check(write_step(source, f"step_{step}.py"), checkpoint)
    assert not report.ok
    assert "Traceback" not in report.render()
    return report


def _failing(report):
    return [p for p in report.parts if p.status != PASS]


@pytest.mark.parametrize("standin", STANDINS)
def test_03_variance_not_centred_is_placed_in_the_division(checkpoints, write_step, standin):
    report = _check(write_step, checkpoints[standin], "03",
                    ("var = (centered * centered).mean(axis=-1)", "var = (x * x).mean(axis=-1)"))
    for part in _failing(report):
        lines = "\n".join(part.details)
        assert "division by the standard deviation: with weight 1" in lines, report.render()
        assert "division by the standard deviation: right" not in lines
        assert part.mistake is None


def test_12_top_k_keeping_the_lowest_is_named_as_such(checkpoint, write_step):
    report = _check(write_step, checkpoint, "12",
                    ("kth = np.sort(logits)[-top_k]\n        logits = np.where(logits < kth",
                     "kth = np.sort(logits)[top_k - 1]\n        logits = np.where(logits > kth"))
    top_k = report.part("top_k")
    assert top_k.mistake is not None and top_k.mistake.id == "top-k-reversed", report.render()
    assert "the 10 lowest" in top_k.summary
    assert all(p.mistake is None or p.mistake.id == "top-k-reversed" for p in _failing(report)), report.render()


def test_12_first_difference_reads_as_a_sentence():
    assert first_difference([33508, 1], [45, 1]) == "the very first token differs; token 0 is 33508, expected 45"
    assert first_difference([1, 2, 9], [1, 2, 3]) == "tokens 0-1 match; token 2 is 9, expected 3"


def test_06_float_positions_name_the_dtype_gather_needs(checkpoint, write_step):
    report = _check(write_step, checkpoint, "06", ("past_length + seq_len, dtype=DType.int64, device",
                                                   "past_length + seq_len, device"))
    summary = _failing(report)[0].summary
    assert "indices float32 [10]" in summary and "gather needs integer indices" in summary, summary
    assert "dtype=DType.int64" in summary and "output_param_decls" not in summary


def test_08_stream_added_twice_says_what_came_out(checkpoint, write_step):
    report = _check(write_step, checkpoint, "08", ("return residual + sublayer(ln(hidden_states))",
                                                   "return residual + sublayer(ln(hidden_states)) + residual"))
    lines = "\n".join(d for p in _failing(report) for d in p.details)
    assert "it returns 2x the stream (the stream added 2 times?)" in lines, report.render()


def test_07_off_by_one_mask_gets_no_rebind_advice_and_no_cut_word(checkpoint, write_step):
    report = _check(write_step, checkpoint, "07", ("causal_mask(seq_len, 0,", "causal_mask(seq_len, 1,"))
    summary = report.part("_attn").summary
    assert "input_y float32 [10, 11]" in summary and "each pair of sizes must be equal" in summary, summary
    assert "rebind" not in summary and not re.search(r"\w\.\.\.$", summary)


def test_07_forward_points_at_the_failing_parts_first_and_blames_nothing_else(checkpoint, write_step):
    report = _check(write_step, checkpoint, "07",
                    ("tensor = tensor.reshape(new_shape)  # [B, T, H, D]\n"
                     "        return tensor.transpose(-3, -2)  # [B, H, T, D]",
                     "return tensor.reshape(new_shape).permute([0, 2, 3, 1])"),
                    ("attn_weights = attn_weights / math.sqrt(int(value.shape[-1]))",
                     "attn_weights = attn_weights * math.sqrt(int(value.shape[-1]))"))
    forward = report.part("forward")
    assert forward.status != PASS
    assert forward.details and forward.details[0].startswith("forward uses _split_heads, _attn"), report.render()
    assert not any(d.startswith(("where", "c_attn's output")) for d in forward.details), report.render()


def test_02_band_one_too_wide_names_the_reference_minus_inf_and_the_future(checkpoint, write_step):
    report = _check(write_step, checkpoint, "02", ("num_upper=num_tokens", "num_upper=num_tokens + 1"))
    part = _failing(report)[0]
    assert "finite where the reference holds -inf" in part.summary, part.summary
    assert any("the future: keys up to 1 position after the query are not masked" in d for d in part.details)


def _raised(fn) -> str:
    with pytest.raises(Exception) as info:
        fn()
    return first_line(info.value)


def test_max_refusals_are_translated():
    from max.experimental import functional as F
    from max.experimental.tensor import Tensor

    w = Tensor.from_dlpack(np.ones((16, 4), np.float32))
    gather = _raised(lambda: F.gather(w, Tensor.arange(0, 3), axis=0))
    assert "indices float32 [3]" in gather and "gather needs integer indices" in gather
    matmul = _raised(lambda: w @ Tensor.from_dlpack(np.ones((4, 2), np.int64)))
    assert "input_y int64 [4, 2]" in matmul and "needs operands of one dtype, these are float32 and int64" in matmul
    reshape = _raised(lambda: w.reshape([5, 4]))
    assert "reshape keeps the number of elements: 64 vs 20" in reshape and "rebind" not in reshape
    concat = _raised(lambda: F.concat([w, Tensor.from_dlpack(np.ones((2, 16, 4), np.float32))], axis=0))
    assert concat == "F.concat needs inputs of one rank, these are [16, 4] (rank 2), [2, 16, 4] (rank 3)"
    broadcast = _raised(lambda: w + Tensor.from_dlpack(np.ones((3,), np.float32)))
    assert "input_y float32 [3]" in broadcast and "each pair of sizes must be equal" in broadcast
    assert "rebind" not in broadcast


def test_two_symbolic_sizes_mixed_compiled_name_both_and_rebind():
    """Equal at runtime is not known when compiling: the message says so rather than "must be equal"."""
    from max.dtype import DType
    from max.experimental.nn import Module
    from max.graph import DeviceRef, TensorType

    class Mul(Module):
        def forward(self, a, b):
            return a * b

    line = _raised(lambda: Mul().compile(*(TensorType(DType.float32, [n], DeviceRef.CPU()) for n in ("rows", "reqs"))))
    assert "'rows' and 'reqs' are two different symbols" in line and "F.rebind" in line, line
    assert "each pair of sizes must be equal" not in line


def test_a_symbolic_dimension_where_an_int_is_needed_is_translated():
    from max.dtype import DType
    from max.experimental.nn import Module
    from max.graph import DeviceRef, TensorType

    class Flatten(Module):
        def forward(self, x):
            return x.reshape([int(x.shape[1]), 4])

    said = _raised(lambda: Flatten().compile(TensorType(DType.float32, [1, "T", 4], device=DeviceRef.CPU())))
    assert said.startswith("int() of the symbolic dimension 'T'"), said


def test_inputs_that_disagree_on_a_symbol_are_translated():
    """A compiled model called with a cache of another batch than its ids: MAX's kernel error, in words."""
    from max.dtype import DType
    from max.experimental.nn import Module
    from max.experimental.tensor import Tensor
    from max.graph import DeviceRef, TensorType

    class Add(Module):
        def forward(self, a, b):
            return a + b

    add = Add().compile(*(TensorType(DType.float32, ["batch", 4], device=DeviceRef.CPU()) for _ in range(2)))
    said = _raised(lambda: add(Tensor.from_dlpack(np.zeros((1, 4), np.float32)),
                               Tensor.from_dlpack(np.zeros((3, 4), np.float32))))
    assert said.startswith("the compiled model was called with inputs that disagree on its symbolic dimension "
                           "'batch': its input 1"), said


def test_weights_that_are_no_distribution_are_translated():
    """numpy's choice given kept probabilities not summed to 1, or logits: what p must be, in words."""
    rng = np.random.default_rng(0)
    said = _raised(lambda: rng.choice(3, p=[0.5, 0.2, 0.1]))
    assert said.startswith("numpy's choice was given probabilities that do not sum to 1") and "top_k" in said, said
    said = _raised(lambda: rng.choice(3, p=[1.5, 0.7, -1.2]))
    assert said.startswith("numpy's choice was given negative probabilities"), said


def test_a_time_limit_inside_maxs_compile_is_not_called_a_loop():
    """A call stopped at its limit while MAX compiles (slow on a busy machine) is told so, not as an infinite loop."""
    from runtime.learner import _why_slow

    def raised_in(filename: str, function: str):
        code = compile(f"def {function}():\n    raise TimeoutError\n", filename, "exec")
        namespace: dict = {}
        exec(code, namespace)
        try:
            namespace[function]()
        except TimeoutError as e:
            return e.__traceback__

    assert _why_slow(raised_in("/venv/lib/python3.13/site-packages/max/engine/api.py", "load")).startswith(
        "still inside MAX's compile")
    assert _why_slow(raised_in("/home/learner/steps/step_14.py", "forward")).startswith("an infinite loop?")


def test_a_wide_axis_is_named_in_one_line():
    """Thousands of differing vocabulary entries: the first runs and the count, not a wall of numbers."""
    from checker.reporting.compare import where_differs

    bad = np.zeros((2, 50257), bool)
    bad[0, ::37] = True
    line = where_differs(bad, ("request", "vocab"))
    assert line.startswith("request 0 (of 2); vocab 0, 37, 74,") and f"{bad.sum()} entries in all" in line
    assert len(line) < 200, line
    assert where_differs(bad[:, :100], ("request", "vocab")) == "request 0 (of 2); vocab 0, 37, 74 (of 100)"


def test_step14_a_request_near_the_tolerance_is_not_called_right():
    """A small error everywhere (a scale slightly off) leaves some requests within the tolerance: they
    are off too, and the per-request advice (rows, positions) must not be given."""
    from checker.reporting.compare import CORRECT_MARGIN, WHOLE_MODEL
    from checker.steps.step14 import paged as step14_paged
    from checker.steps.step14 import reference as step14_reference

    rng = np.random.default_rng(0)
    # per batch, each row's (request, prompt or not)
    rows = step14_reference.scenario_rows(step14_reference.scenario_tokens(400))
    want = [rng.standard_normal((len(batch), 64)) for batch in rows]
    atol = WHOLE_MODEL.atol(np.concatenate(want))
    allowed = [atol + WHOLE_MODEL.rtol * np.abs(w) for w in want]
    # Every request off by half the tolerance, but the first request of batch 1 by twice it (in one row).
    got = [w + 0.5 * a for w, a in zip(want, allowed)]
    got[0][0] = want[0][0] + 2 * allowed[0][0]
    lines = step14_paged.rows_differ(got, want, rows)
    assert "right for none" in lines[0], lines
    assert any(line.startswith("within the tolerance but off") and "at 0.50" in line for line in lines), lines
    assert not any("some prompts are right" in line for line in lines), lines
    # Exact everywhere but one request: the per-request advice.
    got = [w.copy() for w in want]
    got[0][1] = want[0][1] + 3 * allowed[0][1]
    lines = step14_paged.rows_differ(got, want, rows)
    assert any("some prompts are right and others not" in line for line in lines), lines
    assert CORRECT_MARGIN < 0.5


def test_a_passed_step_with_an_optional_part_not_run_says_so_and_not_all():
    """Step 17 passed with its optional int8 part skipped once read "All 6 parts match": five did."""
    report = Report("Step 17", [], [Part("kernel", PASS, "right"),
                                    Part("int8", SKIP, "your step 16 does not pass its check yet", optional=True)])
    text = report.render(color=False)
    assert report.ok and "1 of 2 parts match Hugging Face GPT-2; not run (optional): int8." in text, text
    assert "All" not in text
    report.parts.pop()
    assert "All 1 parts match Hugging Face GPT-2." in report.render(color=False)
