"""Step 14: the learner's served model, against Hugging Face, batch by batch and then by real requests.

    check.py       the check, part by part
    mistakes.py    the catalogue: each known mistake, what it computes, the edit that makes it
    reference.py   the numpy references
    paged.py       the model on MAX's paged cache, a difference placed in its first piece
    served.py      the served part: a real max serve asked as clients ask
    hints.py       a hint ladder per part, and the solution code each part checks
"""

from checker.registry import Step
from checker.steps.step14 import check
from checker.steps.step14.hints import HINTS, SOURCES
from checker.steps.step14.mistakes import CATALOGUE

STEP = Step("14", check.check, CATALOGUE, hints=HINTS, sources=SOURCES)
