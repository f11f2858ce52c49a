"""Files written to Modular's online book in its February 2026 layout (eleven steps in another order,
`from step_NN import ...` of the book's own numbers, MAX 26.1's names and the later max.experimental
ones) get a numeric verdict: tests/book_feb/ holds a complete set, written here to the book's pages,
and each is checked in a clone as a learner runs it, `python -m checker NN` with the book's number."""

from __future__ import annotations

import shutil

import pytest

from runtime.paths import REPO
from tests.conftest import check_reports, course_clone

BOOK = REPO / "tests" / "book_feb"
JANUARY = REPO / "tests" / "book"
# the book's step -> (the course step it is checked as, what the Contract: line names, or None)
LAYOUT = {
    "01": ("01", None), "02": ("04", "GPT2MLP(intermediate_size, config)"), "03": ("02", None), "04": ("07", None),
    "05": ("03", "LayerNorm(dim, *, eps)"), "06": ("09", None), "07": ("10", "MaxGPT2Model(config)"),
    "08": ("11", "MaxGPT2LMHeadModel(config)"), "09": ("12", None), "10": ("12", None), "11": ("11", None),
}


def test_each_file_is_placed_by_what_it_defines():
    """The February files at their course steps; the course's and the January layout's files at their own."""
    from checker import registry
    from checker.harness.layout import place

    for number, (step, _) in LAYOUT.items():
        assert place(BOOK / f"step_{number}.py").step == step, number
    for path in [*JANUARY.glob("step_*.py"), *(REPO / "solutions").glob("solution_*.py")]:
        placed = place(path)
        assert placed.step == path.stem[-2:] and placed.header is None and placed.adapter is None
        assert placed.check is registry.step(placed.step).check


def test_a_file_of_another_steps_names_says_what_it_lacks(write_step):
    """Placed by its names, a file that lacks its own step's says so: here a step 07 whose class is misnamed."""
    from checker.harness.layout import place

    path = write_step("def causal_mask(n, t, *, dtype, device):\n    pass\n\n\nclass GPT2Attention:\n    pass\n")
    placed = place(path)
    assert placed.step == "02" and "defines causal_mask, not GPT2MultiHeadAttention (step 07's)" in placed.header


@pytest.fixture(scope="module")
def feb_reports(tmp_path_factory) -> dict[str, str]:
    """Every February file's report, in a clone whose steps/ hold the eleven, checked by the book's numbers."""
    repo = course_clone(tmp_path_factory.mktemp("book_feb"), {p.name: p.read_text() for p in BOOK.glob("step_*.py")})
    return check_reports(repo, LAYOUT, timeout=1800)


@pytest.mark.parametrize("number", LAYOUT)
def test_february_file_gets_a_numeric_verdict_and_passes(feb_reports, number):
    report = feb_reports[number]
    step, contract = LAYOUT[number]
    assert "parts match Hugging Face GPT-2" in report and "FAIL" not in report, report
    for never in ("No module named", "defines no", "TypeError"):
        assert never not in report, report
    assert f"Step {step} · " in report and f"steps/step_{number}.py" in report, report
    layout = [line for line in report.splitlines() if line.startswith("Layout:")]
    if number == "01":  # GPT2Config is step 01 in every layout
        assert not layout, report
    else:
        assert layout[0].startswith(f"Layout: the online book's February 2026 step {number} ("), report
    contracts = [line for line in report.splitlines() if line.startswith("Contract:")]
    if contract is None:
        assert not contracts, report
    else:
        assert contracts[0].startswith(f"Contract: the online book's step {number}: {contract}"), report


def test_earlier_steps_are_the_learners_february_files(feb_reports):
    """`from step_NN import` is the learner's file of that number, checked as the course step it is."""
    block = next(line for line in feb_reports["06"].splitlines() if "earlier steps" in line)
    assert "01 ok, 03 (as 02) ok, 05 (as 03) ok, 02 (as 04) ok, 04 (as 07) ok" in block, block
    run_model = feb_reports["11"]
    assert "08 (as 11) ok, 09 (as 12) ok, 10 (as 12) ok" in run_model and "Not run: run_model" in run_model, run_model


def _february_folder(tmp_path, number: str, old: str, new: str):
    """The eleven February files in a folder of their own, step `number` with `old` replaced by `new`."""
    for path in BOOK.glob("step_*.py"):
        shutil.copy(path, tmp_path / path.name)
    path = tmp_path / f"step_{number}.py"
    source = path.read_text()
    assert source.count(old) == 1, old
    path.write_text(source.replace(old, new))
    return path


@pytest.mark.parametrize("number, old, new, part, mistake, numbers", [
    ("02", 'F.gelu(hidden_states, approximate="tanh")', "F.gelu(hidden_states)", "forward", "gelu-exact",
     "max|diff|"),
    ("05", "gamma=self.weight, beta=self.bias", "gamma=self.bias, beta=self.weight", "forward", "ln-swapped-affine",
     "max|diff|"),
    ("10", "next_token_logits / temp_tensor", "next_token_logits * temp_tensor", "distribution",
     "temperature-multiplied", "total variation"),
    ("10", "generated_tokens = F.concat(", "appended = F.concat(", "greedy", "greedy-not-fed-back", "21 calls"),
])
def test_wrong_february_file_fails_with_a_numeric_diagnosis(tmp_path, checkpoint, number, old, new, part, mistake,
                                                             numbers):
    """A mistake in a February file is measured and named through the course step's check."""
    from checker.harness import layout

    path = _february_folder(tmp_path, number, old, new)
    report = layout.check(LAYOUT[number][0], path, checkpoint, timeout=300, number=number)
    text = report.render()
    assert text.startswith(f"Layout: the online book's February 2026 step {number}"), text
    found = report.part(part)
    assert found.status == "FAIL" and found.mistake is not None and found.mistake.id == mistake, text
    assert numbers in found.summary, text


def test_a_wrong_earlier_february_step_is_named_by_its_number(tmp_path, checkpoint):
    """A block (the book's step 06) over a wrong MLP (its step 02): the earlier steps part names
    step 02, the course's 04, and says to run pixi run s02; the block's own output fails on numbers."""
    from checker.harness import layout

    _february_folder(tmp_path, "02", 'F.gelu(hidden_states, approximate="tanh")', "F.relu(hidden_states)")
    report = layout.check("09", tmp_path / "step_06.py", checkpoint, timeout=300, number="06")
    text = report.render()
    earlier, forward = report.part("earlier steps"), report.part("forward")
    assert earlier.status == "FAIL" and "02 (as 04) FAILS" in earlier.summary, text
    assert any("pixi run s02" in line for line in earlier.details), text
    assert forward.status == "FAIL" and "max|diff|" in forward.summary, text


def test_a_book_sampler_without_normalising_is_named(tmp_path, checkpoint):
    """The page's sampler as written: float32 probabilities that np.random.choice refuses, named."""
    from checker.harness import layout

    path = _february_folder(tmp_path, "10", "            probs_np = probs_np / probs_np.sum()", "")
    report = layout.check("12", path, checkpoint, timeout=300, number="10")
    found = report.part("distribution")
    assert found.status == "FAIL" and found.mistake.id == "probabilities-not-normalised", report.render()
    assert report.part("greedy").status == "PASS", report.render()
