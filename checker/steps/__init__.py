"""Every step's check, one module per step (`stepNN.py`), and the checks for files of the online
book's other layouts beside them (`step12_book.py`, `main_program.py`). Importing this package
imports each module here, and each registers itself (checker.registry); a new step's check is a
new module here."""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
