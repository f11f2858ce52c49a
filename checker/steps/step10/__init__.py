"""Step 10: the learner's GPT2Model against Hugging Face's last hidden state.

    check.py      the check, part by part
    mistakes.py   the catalogue: each known mistake, what it computes, the edit that makes it
    hints.py      a hint ladder per part, and the solution code each part checks
"""

from checker.registry import Step
from checker.steps.step10 import check
from checker.steps.step10.hints import HINTS, SOURCES
from checker.steps.step10.mistakes import CATALOGUE

STEP = Step("10", check.check, CATALOGUE, hints=HINTS, sources=SOURCES,
            reads=("GPT2Model", "MaxGPT2Model"), probe=check.PROBE)
