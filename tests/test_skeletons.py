"""Skeletons state the task, not the code: how much of each solution a skeleton's comments
and docstrings already hold.

The measure: the solution's code as Python tokens (comments and docstrings left out); a
token counts as given away when a run of 4 tokens around it stands in the skeleton's
comments or docstrings. Tokens the skeleton already holds as code (a run of 4 in its code:
the signatures, `self.c_attn = None`, the imports) are left out of both counts. The
suite prints the per-step figures and fails above 10% overall or 25% for a step.
"""

import io
import re
import tokenize

import pytest

from runtime.paths import REPO

RUN = 4
LIMIT_ALL, LIMIT_STEP = 0.10, 0.25
STEPS = sorted(p.stem.removeprefix("solution_") for p in (REPO / "solutions").glob("solution_[0-9][0-9].py"))
_TOKEN = re.compile(r"\w+|[^\w\s]")  # words and single punctuation marks, in code and prose alike


def code_and_prose(source: str) -> tuple[list[str], list[str]]:
    """The file's code tokens, and its comments and docstrings as tokens."""
    code, prose, previous = [], [], None
    for t in tokenize.generate_tokens(io.StringIO(source).readline):
        if t.type == tokenize.COMMENT:
            prose += _TOKEN.findall(t.string.lstrip("#"))
        elif t.type == tokenize.STRING and (previous is None or previous.type in (
                tokenize.INDENT, tokenize.DEDENT, tokenize.NEWLINE)):
            prose += _TOKEN.findall(t.string.strip("\"'"))  # a string that is a statement: a docstring
        elif t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
            code += _TOKEN.findall(t.string)
        if t.type not in (tokenize.NL, tokenize.COMMENT):
            previous = t
    return code, prose


def _runs(tokens: list[str]) -> set[tuple[str, ...]]:
    return {tuple(tokens[i:i + RUN]) for i in range(len(tokens) - RUN + 1)}


def giveaway(step: str) -> tuple[int, int]:
    """(solution tokens given away in the skeleton's prose, solution tokens the skeleton does not hold as code)."""
    solution, _ = code_and_prose((REPO / "solutions" / f"solution_{step}.py").read_text())
    code, prose = code_and_prose((REPO / "steps" / f"step_{step}.py").read_text())
    held, told = _runs(code), _runs(prose)
    in_code, in_prose = [False] * len(solution), [False] * len(solution)
    for i in range(len(solution) - RUN + 1):
        run = tuple(solution[i:i + RUN])
        marks = in_code if run in held else in_prose if run in told else None
        for j in range(i, i + RUN) if marks is not None else ():
            marks[j] = True
    todo = [not c for c in in_code]
    return sum(p and t for p, t in zip(in_prose, todo)), sum(todo)


@pytest.mark.parametrize("step", STEPS)
def test_skeleton_gives_away_little(step, record_property):
    given, total = giveaway(step)
    record_property("giveaway", [step, given, total])
    assert given <= LIMIT_STEP * total, (
        f"step {step}: {given} of {total} solution tokens are in the skeleton's comments")


def test_skeletons_give_away_little_overall():
    counts = [giveaway(step) for step in STEPS]
    given, total = sum(g for g, _ in counts), sum(t for _, t in counts)
    assert given <= LIMIT_ALL * total, f"{given} of {total} solution tokens are in the skeletons' comments"


def test_the_measure_sees_a_solution_pasted_into_comments(tmp_path, monkeypatch):
    """The measure is not blind: a skeleton whose TODO holds the solution's lines counts them."""
    steps = tmp_path / "steps"
    steps.mkdir()
    (tmp_path / "solutions").symlink_to(REPO / "solutions")
    solution = (REPO / "solutions" / "solution_07.py").read_text()
    body = solution[solution.index("    def _attn"):solution.index("    def forward")]
    pasted = "\n".join("# " + line for line in body.splitlines())
    (steps / "step_07.py").write_text((REPO / "steps" / "step_07.py").read_text() + "\n" + pasted + "\n")
    monkeypatch.setattr("tests.test_skeletons.REPO", tmp_path)
    given, total = giveaway("07")
    assert given > 0.2 * total
