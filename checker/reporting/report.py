"""The verdict of one step's check: a line per part, a closing line, an exit code."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

from checker.reporting.compare import Mistake, Verdict
from runtime.learner import LearnerError

PASS, FAIL, TODO, SKIP = "PASS", "FAIL", "TODO", "SKIP"


@dataclass
class Part:
    name: str
    status: str
    summary: str
    details: list[str] = field(default_factory=list)
    mistake: Mistake | None = None
    margin: float | None = None  # max |diff| / allowed, for a numeric comparison
    optional: bool = False  # a SKIP that leaves the step passed: an optional part not attempted

    @classmethod
    def from_verdict(cls, name: str, v: Verdict) -> Part:
        return cls(name, PASS if v.ok else FAIL, v.summary, v.details, v.mistake, v.margin)

    @classmethod
    def from_error(cls, name: str, e: LearnerError) -> Part:
        return cls(name, TODO if e.todo else SKIP if e.not_run else FAIL, str(e))


@dataclass
class Report:
    title: str  # "Step 07 · GPT2MultiHeadAttention · steps/step_07.py"
    header: list[str]  # first the weights line, then the inputs
    parts: list[Part] = field(default_factory=list)
    printed: str = ""  # what the learner's code printed, shown apart from the verdict
    # the course's step files the checked file imports (checker.harness.verdicts)
    files: list = field(default_factory=list)
    cut_short: bool = False  # a time limit stopped learner code: the verdict holds for this limit only

    @property
    def ok(self) -> bool:
        return bool(self.parts) and all(p.status == PASS or (p.status == SKIP and p.optional) for p in self.parts)

    def part(self, name: str) -> Part:
        return next(p for p in self.parts if p.name == name)

    def render(self, color: bool = False) -> str:
        paint = {PASS: "32", FAIL: "31", TODO: "33", SKIP: "90"}

        def tag(status: str) -> str:
            text = f"{status:<4}"
            return f"\033[1;{paint[status]}m{text}\033[0m" if color else text

        width = max(len(p.name) for p in self.parts) if self.parts else 0
        pad = " " * (width + 10)
        lines = [*self.header, self.title, ""]
        def indented(text: str) -> str:  # a message's own lines (a learner's source line) under its first
            return text.replace("\n", "\n" + pad)

        for p in self.parts:
            lines.append(f"  {tag(p.status)}  {p.name:<{width}}  {indented(p.summary)}")
            lines += [f"{pad}{indented(d)}" for d in p.details]
            if p.mistake:
                lines.append(f"{pad}likely mistake: {p.mistake.says}")
                lines.append(f"{pad}hint: {p.mistake.hint}")
        passed = sum(p.status == PASS for p in self.parts)
        lines.append("")
        skipped = [p.name for p in self.parts if p.status != PASS and p.optional]
        if self.ok and skipped:
            lines.append(f"{passed} of {len(self.parts)} parts match Hugging Face GPT-2; not run (optional): "
                         f"{', '.join(skipped)}.")
        elif self.ok:
            lines.append(f"All {len(self.parts)} parts match Hugging Face GPT-2.")
        else:
            first = next(p for p in self.parts if p.status != PASS)
            lines.append(f"{passed} of {len(self.parts)} parts pass. Start with: {first.name}.")
        if self.printed.strip():
            shown = self.printed.strip().splitlines()
            lines.append(f"\n(your code printed {len(shown)} line(s); the last ones:)")
            lines += [f"  | {line}" for line in shown[-5:]]
        return "\n".join(lines)


def use_color() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")
