"""Step 15: the learner's Mojo kernel for decode's weight products, against numpy and Hugging Face.

    check.py       the check, part by part
    mistakes.py    the catalogue: each known mistake, what it computes, the edit that makes it
    reference.py   the numpy references
    judge.py       the kernel judged on its outputs (steps 15 and 16)
    decode.py      decode through the custom op against Hugging Face; timing
    hints.py       a hint ladder per part, and the solution code each part checks
"""

from checker.registry import Step
from checker.steps.step15 import check
from checker.steps.step15.hints import HINTS, SOURCES
from checker.steps.step15.mistakes import CATALOGUE

STEP = Step("15", check.check, CATALOGUE, hints=HINTS, sources=SOURCES)
