"""Step 04: the learner's GPT2MLP against Hugging Face's `h[0].mlp`, on its real input (ln_2's output).

    check.py      the check, part by part
    mistakes.py   the catalogue: each known mistake, what it computes, the edit that makes it
    hints.py      a hint ladder per part, and the solution code each part checks
"""

from checker.registry import Step
from checker.steps.step04 import check
from checker.steps.step04.hints import HINTS, SOURCES
from checker.steps.step04.mistakes import CATALOGUE

STEP = Step("04", check.check, CATALOGUE, hints=HINTS, sources=SOURCES,
            reads=("GPT2MLP",), probe=check.PROBE)
