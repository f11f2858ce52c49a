"""Which module checks which step: `python -m checker NN` runs `CHECKS[NN].check`."""

import importlib
from types import ModuleType

CHECKS = {f"{n:02d}": f"checker.step{n:02d}" for n in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)}


def check_module(step: str) -> ModuleType:
    return importlib.import_module(CHECKS[step])
