"""Step 02: the learner's causal_mask against the exact mask GPT-2 applies.

    check.py      the check, part by part
    mistakes.py   the catalogue: each known mistake, what it computes, the edit that makes it
    hints.py      a hint ladder per part, and the solution code each part checks
"""

from checker.registry import Step
from checker.steps.step02 import check
from checker.steps.step02.hints import HINTS, SOURCES
from checker.steps.step02.mistakes import CATALOGUE

STEP = Step("02", check.check, CATALOGUE, hints=HINTS, sources=SOURCES,
            reads=("causal_mask",), prepare=check.prepare, probe=check.PROBE,
            compiles_in_check=True)
