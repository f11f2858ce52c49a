"""Step 12: the learner's encode, decode, next_token and generate.

    check.py       the check, part by part
    mistakes.py    the catalogue: each known mistake, what it computes, the edit that makes it
    reference.py   the numpy references
    hints.py       a hint ladder per part, and the solution code each part checks
"""

from checker.registry import Step
from checker.steps.step12 import check
from checker.steps.step12.hints import HINTS, SOURCES
from checker.steps.step12.mistakes import CATALOGUE

STEP = Step("12", check.check, CATALOGUE, hints=HINTS, sources=SOURCES,
            reads=("generate", "next_token", "generate_tokens", "generate_next_token"),
            prepare=check.prepare)
