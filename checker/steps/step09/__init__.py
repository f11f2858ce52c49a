"""Step 09: the learner's GPT2Block against Hugging Face's `transformer.h[0]`.

    check.py      the check, part by part
    mistakes.py   the catalogue: each known mistake, what it computes, the edit that makes it
    hints.py      a hint ladder per part, and the solution code each part checks
"""

from checker.registry import Step
from checker.steps.step09 import check
from checker.steps.step09.hints import HINTS, SOURCES
from checker.steps.step09.mistakes import CATALOGUE

STEP = Step("09", check.check, CATALOGUE, hints=HINTS, sources=SOURCES,
            reads=("GPT2Block",), probe=check.PROBE)
