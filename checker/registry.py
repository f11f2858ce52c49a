"""Which module checks which step: `python -m checker NN` runs `CHECKS[NN].check`, or, for a file of
another layout of the steps, the check of the step it is (checker.layout).

Before the check, `prepare(step, checkpoint)` computes what it compares with
(with torch, once; then cached): the module's own `prepare` where it has
one, otherwise the shared activations of `checker.reference`.
"""

import importlib
from types import ModuleType

CHECKS = {f"{n:02d}": f"checker.step{n:02d}" for n in range(1, 16)}


def check_module(step: str) -> ModuleType:
    return importlib.import_module(CHECKS[step])


def prepare(step: str, checkpoint) -> None:
    module = check_module(step)
    if hasattr(module, "prepare"):
        module.prepare(checkpoint)
    else:
        from checker.reference import activations

        activations(checkpoint)
