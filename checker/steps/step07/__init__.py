"""Step 07: the learner's GPT2MultiHeadAttention against Hugging Face's GPT2Attention.

    check.py      the check, part by part
    mistakes.py   the catalogue: each known mistake, what it computes, the edit that makes it
    hints.py      a hint ladder per part, and the solution code each part checks
"""

from checker.registry import Step
from checker.steps.step07 import check
from checker.steps.step07.hints import HINTS, SOURCES
from checker.steps.step07.mistakes import CATALOGUE

STEP = Step("07", check.check, CATALOGUE, hints=HINTS, sources=SOURCES,
            reads=("GPT2MultiHeadAttention",), probe=check.PROBE,
            compiles_in_check=True)
