"""Step 01: the learner's GPT2Config against the checkpoint's config.json.

    check.py      the check, part by part
    mistakes.py   the catalogue: each known mistake, what it computes, the edit that makes it
    hints.py      a hint ladder per part, and the solution code each part checks
"""

from checker.registry import Step
from checker.steps.step01 import check
from checker.steps.step01.hints import HINTS, SOURCES
from checker.steps.step01.mistakes import CATALOGUE

STEP = Step("01", check.check, CATALOGUE, hints=HINTS, sources=SOURCES,
            reads=("GPT2Config",), prepare=check.prepare)
