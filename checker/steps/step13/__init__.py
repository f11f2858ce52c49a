"""Step 13: the learner's KV cache, against Hugging Face's logits position by position.

    check.py       the check, part by part
    mistakes.py    the catalogue: each known mistake, what it computes, the edit that makes it
    reference.py   the numpy references
    hints.py       a hint ladder per part, and the solution code each part checks
"""

from checker.registry import Step
from checker.steps.step13 import check
from checker.steps.step13.hints import HINTS, SOURCES
from checker.steps.step13.mistakes import CATALOGUE

STEP = Step("13", check.check, CATALOGUE, hints=HINTS, sources=SOURCES,
            reads=("GPT2WithCache", "generate_with_cache", "attention_with_cache", "empty_cache"),
            prepare=check.prepare)
