"""The course's grader: each step's check, each concern a package, imports going only down
(pyproject.toml's import-linter contracts, run by tests/test_imports.py). It runs the learner's code
with the course's runtime (the `runtime` package), which imports nothing of it.

- on top, the commands: `__main__` (python -m checker NN, the `pixi run sNN` tasks), `watch`,
  `progress`, `reset`, `catalogue`, `hints` (--hint, --solution), `warmup`, `weights`, `max_bugs`;
  and `api`, what the course's other commands use of the grader
- `steps/`       a folder per step (`stepNN/`: its check, mistakes, hints, numpy references), found by
                 the registry; `online_book/` the checks for the online book's other layouts
- `harness/`     running a step's check: its parts and report, earlier steps, layouts, cached verdicts
- `diagnosis/`   which sub-part is wrong (localise); which piece changes when compiled (compiled)
- `reporting/`   numbers against references and the verdicts they make; the words hints are made of
- `running/`     the learner's code in a check: tensors in and out, a kernel in a child process
- `references/`  Hugging Face's outputs, and the numpy GPT-2 of known mistakes
- `registry`     what each step's folder declares
"""
