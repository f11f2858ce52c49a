"""Step 17: the learner's FlashAttention kernel and the GPT-2 around it, against numpy and Hugging Face.

    check.py       the check, part by part
    mistakes.py    the catalogue: each known mistake, what it computes, the edit that makes it
    reference.py   the numpy references: the cases, attention, the online softmax as a kernel cuts the keys
    kernel.py      the kernel part: the kernel in a child process, its output and caches judged
    model.py       GPT2Flash against Hugging Face; generate_flash
    timing.py      the kernel against step 13's attention and torch's
    hints.py       a hint ladder per part, and the solution code each part checks
"""

from checker.registry import Step
from checker.steps.step17 import check
from checker.steps.step17.hints import HINTS, SOURCES
from checker.steps.step17.mistakes import CATALOGUE

STEP = Step("17", check.check, CATALOGUE, hints=HINTS, sources=SOURCES)
