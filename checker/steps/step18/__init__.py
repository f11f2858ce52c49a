"""Step 18: the learner's paged FlashAttention and batched int8 products, against numpy, and the GPT-2 they serve.

    check.py       the check, part by part
    mistakes.py    the catalogue: each known mistake, what it computes, the edit that makes it
    reference.py   the numpy references: the ragged paged cases, attention through the page table, the products
    reading.py     a wrong kernel read from what it computed and the pool it left
    kernel.py      the attention and products parts: the kernels in a child process, judged
    served.py      the served part: max serve of GPT2PagedQ8, asked as clients ask
    hints.py       a hint ladder per part, and the solution code each part checks
"""

from checker.registry import Step
from checker.steps.step18 import check
from checker.steps.step18.hints import HINTS, SOURCES
from checker.steps.step18.mistakes import CATALOGUE

STEP = Step("18", check.check, CATALOGUE, hints=HINTS, sources=SOURCES)
