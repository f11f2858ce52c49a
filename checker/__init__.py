"""The course's check machinery: weights, references, diagnosis and reports.

Each step's check lives in `checker/stepNN.py` and is run with
`python -m checker NN` (the `pixi run sNN` tasks). The pieces they share:

- `paths`      where the repo, the weights and the caches are
- `weights`    finds, downloads, verifies or generates a GPT-2 checkpoint
- `reference`  Hugging Face outputs, computed once and cached on disk
- `learner`    imports a learner's step file and runs its code safely
- `compare`    numbers against references, and the diagnosis of mistakes
- `report`     the per-part verdict lines and the exit code
"""

import os as _os

# Run learner code on MAX's eager interpreter alone. The default executor also
# compiles every new graph in background processes, which on a 2-core machine
# halves the speed of the kernel compiles a first check waits for (measured:
# 304 s -> 155 s for a cold step 07), and its results are never used here.
# Set before MAX is imported, and inherited by the warm-up workers.
_os.environ.setdefault("MAX_EAGER_EXECUTOR", "interpreter")
