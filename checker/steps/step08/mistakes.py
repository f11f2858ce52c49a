"""Step 08's catalogue: residual_step wired wrongly, each as numpy computes half(x, ln, sublayer) from the
numpy ln and sub-layer (checker.references.block_np), and the edit that makes it in the solution."""

from __future__ import annotations

from functools import partial

from checker.references.block_np import WIRING_CODE, WIRING_MISTAKES, half
from checker.reporting.compare import Edit, Mistake

RIGHT = "return residual + sublayer(ln(hidden_states))"


def _written(code: str) -> str:
    """A wiring's code (in x, ln, f) as the solution's return line."""
    return "return " + code.replace("f(", "sublayer(").replace("x", "hidden_states")


CATALOGUE = [Mistake(f"residual-{w}", says, hint, partial(half, wiring=w), Edit(RIGHT, _written(WIRING_CODE[w])))
             for w, (says, hint) in WIRING_MISTAKES.items()]
