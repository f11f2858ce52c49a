"""Uncatalogued mistakes, located: every mutation in tests/unseen.py, injected into a copy of the
solution, must fail its step's check, and the failing parts must place the fault in the sub-part (or
part) its `cause` names, without calling that sub-part right and without blaming another one alone.

A failing part's lines are its name with its summary, its details and its "likely mistake". Each
line is cut into clauses (at "; ", outside parentheses), after a leading "where (...):". A clause is

  right     "<sub-part>: right", "<sub-part> alone right", "<sub-parts> are right" (at its end);
  wrong     it names a sub-part of the step (SUBPARTS) and does not say "right";
  neutral   it names a sub-part and says "right" somewhere inside ("the body gives the right ...");
  free      anything else ("every position holds a row of wte, each -1 from the right one").

For a mutation, with its cause words:
  failed      the check does not pass;
  all-right   the sub-part verdicts are all right, none wrong, and no line says the probes could not
              place the fault;
  placed      a wrong or free clause holds a cause word (a neutral one: after its "right");
  misleading  all-right, or a cause word in a right clause (in a neutral one: before its "right"),
              or a wrong clause about another sub-part while the fault is not placed.

The session ends with the table (per step: mutations, failed, placed, misleading), printed by
tests/conftest.py from what each case records.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pytest

from checker import registry
from checker.reporting.report import FAIL, Part, Report
from tests.conftest import add_kernel, mutate, solution_source
from tests.unseen import SUBPARTS, UNSEEN, Mutation

_WHERE = re.compile(r"^where(?: \([^)]*\))?:\s*")
_RIGHT_CLAIM = re.compile(r"^(?P<subject>.+?)(?::| alone:?| is| are) right$")
_RIGHT_WORD = re.compile(r"\bright\b")
_UNPLACED = re.compile(r"could not (?:place|tell|locate|find)|cannot (?:place|tell|locate)|not be placed", re.I)


def _word(word: str) -> re.Pattern:
    """A cause word or sub-part name as a whole word, any case ("h.N": any block's name)."""
    if word == "h.N":
        return re.compile(r"(?<![\w.])h\.\d+(?!\d)")
    return re.compile(r"(?<!\w)" + re.escape(word) + r"(?!\w)", re.I)


def _split_top(text: str, sep: str, maxsplit: int = -1) -> list[str]:
    """`text` split at `sep` where it is outside parentheses."""
    pieces, depth, start, i = [], 0, 0, 0
    while i < len(text):
        c = text[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth = max(depth - 1, 0)
        elif depth == 0 and text.startswith(sep, i) and maxsplit != len(pieces):
            pieces.append(text[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    return [*pieces, text[start:]]


def strip_asides(text: str) -> str:
    """`text` without its asides: " (...)" groups, nested ones included; "ln(x)" stays."""
    out, depth, kept = [], 0, 0
    for i, c in enumerate(text):
        if depth:
            depth += (c == "(") - (c == ")")
            continue
        if c == "(" and kept == 0 and i > 0 and text[i - 1] == " ":
            depth = 1
            if out and out[-1] == " ":
                out.pop()
            continue
        if c == "(":
            kept += 1
        elif c == ")" and kept:
            kept -= 1
        out.append(c)
    return "".join(out)


@dataclass
class Clause:
    text: str  # where cause words are looked for
    kind: str  # "right", "wrong", "neutral" or "free"

    def holds(self, word: str) -> bool:
        return bool(_word(word).search(self.text))

    def right_at(self) -> int:
        """Where a neutral clause says "right"."""
        return _RIGHT_WORD.search(self.text).start()


def clauses(line: str, labels: tuple[str, ...]) -> list[Clause]:
    found = []
    for clause in _split_top(_WHERE.sub("", line.strip()), "; "):
        stripped = strip_asides(clause).strip()
        claim = _RIGHT_CLAIM.match(stripped)
        if claim:
            found.append(Clause(claim["subject"], "right"))
            continue
        name_verdict = _split_top(clause, ": ", maxsplit=1)
        if len(name_verdict) == 2:
            name, verdict = strip_asides(name_verdict[0]).strip(), name_verdict[1]
            text = f"{name}: {verdict}"
        else:
            name, verdict, text = stripped, stripped, clause
        if any(_word(label).search(name) for label in labels):
            found.append(Clause(text, "neutral" if _RIGHT_WORD.search(verdict) else "wrong"))
        else:
            found.append(Clause(text, "free"))
    return found


def part_lines(part: Part) -> list[str]:
    """A part's lines as the report prints them: name and summary, details, likely mistake."""
    lines = f"{part.name}  {part.summary}".splitlines()
    for detail in part.details:
        lines += detail.splitlines()
    if part.mistake:
        lines.append(f"likely mistake: {part.mistake.says}")
    return lines


@dataclass
class Judgement:
    failed: bool
    all_right: bool = False
    placed: bool = False
    misleading: bool = False
    named: list[str] = field(default_factory=list)  # catalogued mistakes the failing parts name
    lines: list[str] = field(default_factory=list)  # the failing parts' lines


def judge_parts(parts: list[Part], step: str, cause: tuple[str, ...]) -> Judgement:
    failing = [p for p in parts if p.status == FAIL]
    if not failing:
        return Judgement(failed=False)
    lines = [line for p in failing for line in part_lines(p)]
    found = [c for line in lines for c in clauses(line, SUBPARTS.get(step, ()))]
    unplaceable = any(_UNPLACED.search(line) for line in lines)
    all_right = (any(c.kind == "right" for c in found) and not any(c.kind == "wrong" for c in found)
                 and not unplaceable)

    def placed_by(c: Clause, word: str) -> bool:
        if c.kind in ("wrong", "free"):
            return c.holds(word)
        if c.kind == "neutral":
            return any(m.start() > c.right_at() for m in _word(word).finditer(c.text))
        return False

    def called_right(c: Clause, word: str) -> bool:
        if c.kind == "right":
            return c.holds(word)
        if c.kind == "neutral":
            return any(m.start() < c.right_at() for m in _word(word).finditer(c.text))
        return False

    placed = any(placed_by(c, w) for c in found for w in cause)
    cause_right = any(called_right(c, w) for c in found for w in cause)
    other_wrong = any(c.kind == "wrong" and not any(c.holds(w) for w in cause) for c in found)
    return Judgement(
        failed=True, all_right=all_right, placed=placed,
        misleading=all_right or cause_right or (other_wrong and not placed),
        named=[p.mistake.id for p in failing if p.mistake], lines=lines,
    )


def judge(report: Report, m: Mutation) -> Judgement:
    return judge_parts(report.parts, m.step, m.cause)


# ---- the mutations themselves: well-formed and new ----

def test_each_mutation_applies_once_and_is_new():
    names = [(m.step, m.name) for m in UNSEEN]
    assert len(names) == len(set(names)), "two mutations of a step share a name"
    for m in UNSEEN:
        source = solution_source(m.step)
        assert mutate(source, m.old, m.new) != source, m.name
        assert m.cause and all(m.cause), m.name
        catalogue = {c.id: c.edit for c in registry.step(m.step).catalogue}
        assert m.name not in catalogue, f"{m.step} {m.name} is a catalogued mistake's id"
        assert (m.old, m.new) not in {(e.old, e.new) for e in catalogue.values()}, (
            f"{m.step} {m.name} is a catalogued edit")


@pytest.mark.parametrize("step", sorted({f"{n:02d}" for n in range(2, 15)}))
def test_at_least_five_per_step(step):
    assert sum(m.step == step for m in UNSEEN) >= 5


# ---- the judgement, on lines the checks print ----

def _part(*details: str, summary: str = "max|diff| 1e+00", name: str = "forward", mistake=None) -> Part:
    return Part(name, FAIL, summary, list(details), mistake)


def test_judgement_all_right_is_misleading():
    part = _part("where (each sub-part alone): c_fc alone: right",
                 "the activation between them (read through c_fc and c_proj): right (GELU, tanh approximation)",
                 "c_proj alone: right",
                 "each piece is right alone: what forward does around them is not (their order, an extra term?)")
    j = judge_parts([part], "04", ("c_proj",))
    assert j.all_right and j.misleading and not j.placed


def test_judgement_the_aside_of_a_name_is_not_the_sub_part():
    part = _part("where (each sub-part alone): c_fc alone: right",
                 "the activation between them (read through c_fc and c_proj): at x = -2 it gives -0.238",
                 "c_proj alone: right")
    j = judge_parts([part], "04", ("c_fc",))
    assert not j.placed and j.misleading and not j.all_right
    assert judge_parts([part], "04", ("activation",)).placed


def test_judgement_combined_right_line_names_both():
    part = _part("where (each sub-part alone): with weight 1 and bias 0 it normalises each row right: the centring "
                 "and the division by the standard deviation are right", "scale by weight: right",
                 "shift by bias: with weight 1 the result is not its normalised rows plus bias")
    assert judge_parts([part], "03", ("shift by bias",)).placed
    j = judge_parts([part], "03", ("division",))
    assert j.misleading and not j.placed


def test_judgement_residual_sub_parts():
    part = _part("where (each sub-part alone): with a sub-layer that returns 0, the stream passes through: right",
                 "the sub-layer's output is added to the stream (ln passing x on, the sub-layer doubling it): no",
                 "the sub-layer reads ln(x) (ln doubling x, the sub-layer adding 1: x + (2x + 1)): no")
    j = judge_parts([part], "08", ("added to the stream",))
    assert j.placed and not j.misleading
    assert judge_parts([part], "08", ("passes through",)).misleading


def test_judgement_model_and_head_lines():
    follows = _part("where: every block's input and output are right; what follows h.11 is not (ln_f?)")
    assert judge_parts([follows], "10", ("ln_f",)).placed
    wiring = _part("where: h.0 to h.0 are right, but h.1's input is not h.0's output")
    j = judge_parts([wiring], "10", ("h.1's input",))
    assert j.placed and not j.misleading and not j.all_right
    assert judge_parts([wiring], "10", ("h.0",)).misleading
    head = _part("where: the body (self.transformer) gives the right last hidden state; the head after it "
                 "(hidden_states @ wte.weight.T) is not", name="logits")
    j = judge_parts([head], "11", ("head",))
    assert j.placed and not j.misleading
    assert judge_parts([head], "11", ("body",)).misleading


def test_judgement_attention_forward_lines():
    part = _part("where: c_attn alone right; c_proj alone right",
                 "c_attn's output has q, k, v as 768-wide thirds, in that order: with the parts above right, "
                 "look at how forward splits and passes them")
    j = judge_parts([part], "07", ("c_attn",))
    assert j.all_right and j.misleading and not j.placed
    scale = _part("where (the weights, read through one-hot values): mask: right", "normalisation: right",
                  "scale: the weights follow softmax(q.k x 0.4951), expected x 0.125 = 1/sqrt(head_dim)",
                  name="_attn")
    j = judge_parts([scale], "07", ("scale",))
    assert j.placed and not j.misleading
    j = judge_parts([scale], "07", ("mask",))
    assert j.misleading and not j.placed


def test_judgement_rows_and_part_names():
    rows = _part("where: every position holds a row of wte, each -1 from the right one")
    assert judge_parts([rows], "05", ("row",)).placed
    top_k = _part(summary="top_k=1 must pick the best token every time", name="top_k=1")
    assert judge_parts([top_k], "12", ("top_k",)).placed
    assert not judge_parts([top_k], "12", ("greedy",)).placed
    blocks = _part("where: the blocks ran in the order h.0, h.1, h.2, h.3, h.4, h.5, h.6, h.7, h.8, h.9, h.10 "
                   "(expected h.0 to h.11, once each)")
    assert judge_parts([blocks], "10", ("h.11",)).placed
    assert not judge_parts([_part("where: h.10 is not")], "10", ("h.1",)).placed
    loader = _part(summary="load_state_dict refused what your loader passed: missing from what was passed: "
                   "transformer.h.N.attn.c_attn.bias (all 12 blocks)", name="loading this checkpoint")
    assert judge_parts([loader], "11", ("c_attn",)).placed


# ---- every mutation, checked ----

@pytest.mark.parametrize("m", UNSEEN, ids=[f"{m.step}-{m.name}" for m in UNSEEN])
def test_unseen_mistake_is_placed(checkpoint, write_step, record_property, m):
    path = write_step(mutate(solution_source(m.step), m.old, m.new), f"step_{m.step}.py")
    add_kernel(path, m.step)  # the kernel's Mojo package beside it, unchanged
    report = registry.step(m.step).check(path, checkpoint)
    j = judge(report, m)
    record_property("unseen", [m.step, m.name, j.failed, j.all_right, j.placed, j.misleading])
    assert j.failed, f"the check passed a copy of the solution with {m.name} made"
    verdict = (f"{m.step} {m.name}: cause {' | '.join(m.cause)}; all-right {j.all_right}, placed {j.placed}, "
               f"misleading {j.misleading}, catalogued mistakes named {j.named or 'none'}; the failing parts say:\n"
               + "\n".join(f"    {line}" for line in j.lines))
    assert not j.all_right, verdict
    assert j.placed and not j.misleading, verdict
    assert "Traceback" not in report.render()
