"""Step 03: the learner's LayerNorm against Hugging Face's `h[0].ln_1`.

    check.py      the check, part by part
    mistakes.py   the catalogue: each known mistake, what it computes, the edit that makes it
    hints.py      a hint ladder per part, and the solution code each part checks
"""

from checker.registry import Step
from checker.steps.step03 import check
from checker.steps.step03.hints import HINTS, SOURCES
from checker.steps.step03.mistakes import CATALOGUE

STEP = Step("03", check.check, CATALOGUE, hints=HINTS, sources=SOURCES,
            reads=("LayerNorm",), probe=check.PROBE)
