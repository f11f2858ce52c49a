"""Which module checks which step: `python -m checker NN` runs `CHECKS[NN].check`."""

import importlib
from types import ModuleType

CHECKS = {f"{n:02d}": f"checker.step{n:02d}" for n in range(1, 13)}


def check_module(step: str) -> ModuleType:
    return importlib.import_module(CHECKS[step])
