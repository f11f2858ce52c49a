"""Step 06: the learner's position embedding against Hugging Face's `wpe`, with and without cached tokens.

    check.py      the check, part by part
    mistakes.py   the catalogue: each known mistake, what it computes, the edit that makes it
    hints.py      a hint ladder per part, and the solution code each part checks
"""

from checker.registry import Step
from checker.steps.step06 import check
from checker.steps.step06.hints import HINTS, SOURCES
from checker.steps.step06.mistakes import CATALOGUE

STEP = Step("06", check.check, CATALOGUE, hints=HINTS, sources=SOURCES,
            reads=("GPT2PositionEmbedding", "GPT2PositionEmbeddings"), probe=check.PROBE)
