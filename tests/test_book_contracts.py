"""Files written to Modular's online book (Jan 2026 layout: its contracts, MAX 25.7 and 26.1 names)
get a numeric verdict from every check: tests/book/ holds a complete set of twelve, written here
to the book's pages. Each row of the book's "Coming from the online book" table
(book/docs/online-book.md) is a step below."""

from __future__ import annotations

import pytest

from runtime.paths import REPO
from tests.conftest import check_reports, course_clone, run_python

BOOK = REPO / "tests" / "book"
# step -> what the header says of the contract it recognised (None: the course's own contract fits)
CONTRACTS = {
    "01": None, "02": None, "03": "LayerNorm(dim, *, eps)", "04": "GPT2MLP(intermediate_size, config)",
    "05": "GPT2Embeddings(config)", "06": "GPT2PositionEmbeddings(config)", "07": None,
    "08": "apply_residual_connection", "09": None, "10": None, "11": "MaxGPT2LMHeadModel(config)",
    "12": "generate_next_token and generate_tokens",
}


@pytest.fixture(scope="module")
def book_repo(tmp_path_factory):
    """A clone of the course whose steps/ are the book-style files."""
    return course_clone(tmp_path_factory.mktemp("book"), {p.name: p.read_text() for p in BOOK.glob("step_*.py")})


@pytest.fixture(scope="module")
def book_reports(book_repo) -> dict[str, str]:
    """Every check's report on the book-style files, as a learner runs it."""
    return check_reports(book_repo, CONTRACTS, timeout=1500)


@pytest.mark.parametrize("step", CONTRACTS)
def test_book_file_gets_a_numeric_verdict_and_passes(book_reports, step):
    report = book_reports[step]
    assert "parts match Hugging Face GPT-2" in report and "FAIL" not in report, report
    for never in ("No module named", "defines no", "TypeError"):
        assert never not in report, report
    contract = CONTRACTS[step]
    if contract is None:
        assert "Contract:" not in report, report
    else:
        line = next(line for line in report.splitlines() if line.startswith("Contract:"))
        assert f"the online book's step {step}" in line and contract in line, report


def test_old_max_names_are_resolved_and_the_change_is_said(book_reports):
    """25.7's max.nn.module_v3, 26.1's max.nn / max.tensor / max.functional: each file that uses one
    is told the line to change; the book's solutions.solution_NN imports are the learner's own steps."""
    said = {step: [line for line in r.splitlines() if line.startswith("Imports:")] for step, r in book_reports.items()}
    assert "max.nn.module_v3 import ... -> from max.experimental.nn import" in said["04"][0]
    assert "import max.functional -> import max.experimental.functional" in said["03"][0]
    assert "from max.nn import Module (MAX 26.1) -> from max.experimental.nn" in said["03"][0]
    assert "from max.tensor import ... -> from max.experimental.tensor" in said["07"][0]
    assert "solutions.solution_08 import ... is your steps/step_08.py" in " ".join(said["09"])
    assert not said["01"] and not said["02"]


def test_the_books_mask_hint_is_named_with_its_context(write_step, checkpoint):
    """The book's step 02 hint, band_part(..., num_upper=0), ignores the cached tokens."""
    from checker.steps.step02 import check as step02
    source = (BOOK / "step_02.py").read_text().replace("num_upper=num_tokens", "num_upper=0")
    report = step02.check(write_step(source, "step_02.py"), checkpoint)
    part = next(p for p in report.parts if p.name == "with cache")
    assert part.status == "FAIL" and part.mistake.id == "mask-ignores-cache", report.render()
    assert "online book" in report.render()


@pytest.mark.parametrize("wrong, mistake", [
    ("logits / Tensor.constant(1.0,", "temperature-ignored"),
    ("logits * Tensor.constant(temperature,", "temperature-multiplied"),
])
def test_book_sampling_mistakes_are_named(write_step, checkpoint, wrong, mistake):
    """The book's sampler, with the temperature left out or multiplied, through the step 12 adapter."""
    from checker.steps.step12 import check as step12
    source = (BOOK / "step_12.py").read_text().replace("logits / Tensor.constant(temperature,", wrong)
    report = step12.check(write_step(source, "step_12.py"), checkpoint)
    part = next(p for p in report.parts if p.name == "distribution")
    assert part.status == "FAIL" and part.mistake is not None and part.mistake.id == mistake, report.render()


def test_gpt2_writes_with_a_book_learners_model(book_repo):
    """`pixi run gpt2` drives a model and sampler written to the book: the same ids as transformers."""
    out = run_python("-m", "gpt2", "The cat sat", "--compare", "--max-new-tokens", "8", cwd=book_repo, timeout=900)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "online book's contract" in out.stdout and "Token ids identical for all 8 new tokens" in out.stdout


@pytest.mark.parametrize("step, old, new, part, mistake", [
    ("03", "gamma=self.weight, beta=self.bias", "gamma=self.bias, beta=self.weight", "forward", "ln-swapped-affine"),
    ("04", 'F.gelu(self.c_fc(hidden_states), approximate="tanh")', "F.gelu(self.c_fc(hidden_states))", "forward",
     "gelu-exact"),
    ("05", "return self.wte(input_ids)", "return self.wte(input_ids) * (768 ** 0.5)", "forward", "embedding-scaled"),
    ("08", "return input_tensor + sublayer_output", "return sublayer_output", "attention half", "residual-no-residual"),
])
def test_wrong_book_file_fails_through_its_adapter(write_step, checkpoint, step, old, new, part, mistake):
    """A mistake in a file written to the book is caught and named through the step's adapter."""
    from checker import registry

    source = (BOOK / f"step_{step}.py").read_text()
    assert source.count(old) == 1, old
    report = registry.step(step).check(write_step(source.replace(old, new), f"step_{step}.py"), checkpoint)
    text = report.render()
    assert "Contract: the online book's" in text, text
    found = next(p for p in report.parts if p.name == part)
    assert found.status == "FAIL" and found.mistake is not None and found.mistake.id == mistake, text
