"""The course's checks, each concern a package, imports going only down (pyproject.toml's
import-linter contracts, run by tests/test_imports.py):

- on top, the commands: `__main__` (python -m checker NN, the `pixi run sNN` tasks), `watch`,
  `progress`, `reset`, `catalogue`, `hints` (--hint, --solution), `warmup`, `weights`, `max_bugs`
- `steps/`       each step's check, `stepNN.py`, and the adapters for the online book's layouts;
                 each registers itself (its check, mistakes, names it reads, compiled probe)
- `harness/`     running a step's check: its parts and report, earlier steps, layouts, cached verdicts
- `diagnosis/`   which sub-part is wrong (localise); which piece changes when compiled (compiled)
- `reporting/`   numbers against references (compare); the verdict lines and exit code (report)
- `running/`     the learner's code run safely: import, time limits, MAX errors, weights into modules
- `references/`  checkpoints and stand-ins, Hugging Face's outputs, the numpy GPT-2 of known mistakes
- `registry`     what the steps registered; `paths` where things are
"""

import os as _os

# Run learner code on MAX's eager interpreter alone. The default executor also
# compiles every new graph in background processes, which on a 2-core machine
# halves the speed of the kernel compiles a first check waits for (measured:
# 304 s -> 155 s for a cold step 07), and its results are never used here.
# Set before MAX is imported, and inherited by the warm-up workers.
_os.environ.setdefault("MAX_EAGER_EXECUTOR", "interpreter")
