"""Step 11: the learner's GPT2LMHeadModel and load_hf_weights against Hugging Face's logits.

    check.py      the check, part by part
    mistakes.py   the catalogue: each known mistake, what it computes, the edit that makes it
    hints.py      a hint ladder per part, and the solution code each part checks
"""

from checker.registry import Step
from checker.steps.step11 import check
from checker.steps.step11.hints import HINTS, SOURCES
from checker.steps.step11.mistakes import CATALOGUE

STEP = Step("11", check.check, CATALOGUE, hints=HINTS, sources=SOURCES,
            reads=("GPT2LMHeadModel", "MaxGPT2LMHeadModel"))
