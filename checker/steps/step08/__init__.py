"""Step 08: the learner's residual_step, around the reference ln_1 + attention and ln_2 + MLP.

    check.py      the check, part by part
    mistakes.py   the catalogue: each known mistake, what it computes, the edit that makes it
    hints.py      a hint ladder per part, and the solution code each part checks
"""

from checker.registry import Step
from checker.steps.step08 import check
from checker.steps.step08.hints import HINTS, SOURCES
from checker.steps.step08.mistakes import CATALOGUE

STEP = Step("08", check.check, CATALOGUE, hints=HINTS, sources=SOURCES,
            reads=("residual_step", "apply_residual_connection"), probe=check.PROBE)
