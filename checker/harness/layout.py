"""Which of this course's steps a step file is, read from what it defines, not from its number.

This course and the online book's January 2026 layout number their steps alike. The online book's
February 2026 layout (modular/max-llm-book, 2026-01-15 to 2026-03-06) has eleven steps in another
order, so a learner's `steps/step_02.py` of that layout holds GPT2MLP, this course's step 04:

    book (Feb 2026)  01 GPT2Config  02 GPT2MLP  03 causal_mask  04 GPT2MultiHeadAttention  05 LayerNorm
                     06 GPT2Block  07 MaxGPT2Model  08 MaxGPT2LMHeadModel  09 encode_text, decode_tokens
                     10 generate_text  11 run_model
    this course      01  04  02  07  03  09  10  11  12 (encode/decode)  12 (generate)  -

`place(path, number)` parses the file (ast: nothing of it runs) and returns where it belongs: the
course step it is checked as, the module whose `check` reads it, and the report's "Layout:" line
when that is not the step of its number. `check(step, path, ...)` runs that check; `python -m
checker NN` and the "earlier steps" part of steps 09-14 (checker.harness.deps, checker.harness.verdicts) both go
through it, so a file is judged alike wherever it is checked from.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from checker import registry
from runtime.paths import shown

# The online book's February 2026 layout: its step -> (what it defines, the course step it is checked as,
# what it is here).
FEBRUARY = {
    "01": ("GPT2Config", "01", "this course's step 01"),
    "02": ("GPT2MLP", "04", "this course's step 04; checked as step 04"),
    "03": ("causal_mask", "02", "this course's step 02; checked as step 02"),
    "04": ("GPT2MultiHeadAttention", "07", "this course's step 07; checked as step 07"),
    "05": ("LayerNorm", "03", "this course's step 03; checked as step 03"),
    "06": ("GPT2Block", "09", "this course's step 09; checked as step 09"),
    "07": ("MaxGPT2Model", "10", "this course's step 10 (GPT2Model); checked as step 10"),
    "08": ("MaxGPT2LMHeadModel", "11", "this course's step 11 (GPT2LMHeadModel); checked as step 11"),
    "09": ("encode_text, decode_tokens", "12", "the encode/decode of this course's step 12; checked as that "
           "part of step 12"),
    "10": ("generate_text", "12", "the generation of this course's step 12; checked as step 12's greedy and "
           "sampled generation"),
    "11": ("run_model", "11", "a main program, with no check of its own in this course; checked: what it runs "
           "(as steps 11 and 12) and what it calls"),
}
_NUMBER = re.compile(r"^(?:step|solution)_(\d\d)\.py$")


@dataclass(frozen=True)
class Placement:
    step: str  # this course's step the file is checked as
    adapter: Callable | None = None  # the check for its layout (checker.registry.Adapter), else the step's own
    header: str | None = None  # the report's "Layout:" line, when the file is not the step of its number

    @property
    def check(self) -> Callable:
        """check(path, checkpoint, timeout=): the one that reads the file."""
        return self.adapter or registry.step(self.step).check


def _reads() -> dict[str, tuple[str, ...]]:
    """This course's step -> the names its own check reads in a file: this course's and the online
    book's (January and February 2026), whose contracts the adapters beside each check handle."""
    return {number: s.reads for number, s in registry.steps().items() if s.reads}


def _others() -> dict[str, tuple[str, Callable]]:
    """Names whose files the step's own check cannot read: the step and the adapter that can."""
    return {name: (a.step, a.check) for a in registry.adapters() for name in a.reads}


def defined(path: Path) -> set[str]:
    """The names a file defines at its top level (classes, functions, assignments); empty if unreadable."""
    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError, ValueError):
        return set()
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def number_of(path: Path) -> str | None:
    """'06' for step_06.py or solution_06.py; None for another name."""
    m = _NUMBER.match(Path(path).name)
    return m.group(1) if m else None


def place(path: Path, number: str | None = None) -> Placement:
    """Where the file at `path` belongs. `number` is the step it was asked as (its file name's by default).

    The step of its number when the file defines what that step's check reads (or nothing known);
    else the latest course step whose names it defines (a later step may define an earlier one's
    helper too); else a step whose check lives beside it (checker.steps.online_book.step12,
    checker.steps.online_book.main_program).
    """
    number = number or number_of(path)
    names = defined(path)
    reads, others = _reads(), _others()
    steps = sorted(s for s, known in reads.items() if names.intersection(known))
    if number in steps or not (steps or names.intersection(others)):
        return Placement(number)
    if steps:
        step, adapter = steps[-1], None
    else:
        step, adapter = max((others[n] for n in names if n in others), key=lambda o: o[0])
    return Placement(step, adapter, _header(path, number, step, names, reads, others))


def _header(path: Path, number: str | None, step: str, names: set[str], reads: dict, others: dict) -> str:
    book = FEBRUARY.get(number or "")
    if book and book[1] == step:
        return f"Layout: the online book's February 2026 step {number} ({book[0]}) is {book[2]}"
    known = ", ".join(sorted(names.intersection({*reads.get(step, ()), *others})))
    own = f", not {' or '.join(reads[number])} (step {number}'s)" if number in reads else ""
    return f"Layout: {shown(path)} defines {known}{own}: checked as step {step}, the step of {known}"


def book_number(path: Path, step: str, number: str | None = None) -> str:
    """The online book's number of a file checked as `step`: its own, where the book's February 2026
    layout has that step under it, else `step` (the January layout's numbers are this course's)."""
    number = number or number_of(path)
    return number if number in FEBRUARY and FEBRUARY[number][1] == step else step


def check(step: str, path: Path, checkpoint, *, timeout: float, number: str | None = None):
    """Step `step`'s check of the file at `path`: through the module its placement names when the
    file is placed at `step` (its "Layout:" line first in the header), else the step's own check."""
    placement = place(path, number)
    if placement.step != step:
        placement = Placement(step)
    report = placement.check(path, checkpoint, timeout=timeout)
    if placement.header:
        report.header.insert(0, placement.header)
    return report
