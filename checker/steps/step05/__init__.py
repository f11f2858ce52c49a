"""Step 05: the learner's token embedding against Hugging Face's `wte` on the check's token ids.

    check.py      the check, part by part
    mistakes.py   the catalogue: each known mistake, what it computes, the edit that makes it
    hints.py      a hint ladder per part, and the solution code each part checks
"""

from checker.registry import Step
from checker.steps.step05 import check
from checker.steps.step05.hints import HINTS, SOURCES
from checker.steps.step05.mistakes import CATALOGUE

STEP = Step("05", check.check, CATALOGUE, hints=HINTS, sources=SOURCES,
            reads=("GPT2TokenEmbedding", "GPT2Embeddings"), probe=check.PROBE)
