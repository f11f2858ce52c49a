"""Step 16: the learner's 8-bit weights and int8 Mojo kernel, against numpy and Hugging Face.

    check.py      the check, part by part
    mistakes.py   the catalogue: each known mistake, what it computes, the edit that makes it
    quantize.py   the quantize and dequantize parts
    kernel.py     the int8 kernel part
    decode.py     what quantisation costs; the int8 decode against transformers; timing
    hints.py      a hint ladder per part, and the solution code each part checks
"""

from checker.registry import Step
from checker.steps.step16 import check
from checker.steps.step16.hints import HINTS, SOURCES
from checker.steps.step16.mistakes import CATALOGUE

STEP = Step("16", check.check, CATALOGUE, hints=HINTS, sources=SOURCES)
