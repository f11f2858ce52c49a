"""The course's check machinery: weights, references, diagnosis and reports.

Each step's check lives in `checker/stepNN.py` and is run with
`python -m checker NN` (the `pixi run sNN` tasks). The pieces they share:

- `paths`, `registry`   where things are; which module checks which step
- `weights`, `synthetic` find, download, verify or generate a GPT-2 checkpoint
- `reference`           Hugging Face outputs, computed once and cached on disk
- `learner`             imports a learner's step file and runs its code safely
- `runner`, `loading`   a step's parts; GPT-2's weights into the learner's modules
- `compare`             numbers against references, and the naming of known mistakes
- `attention_np`, `gpt2_np`, `block_np`   what each known mistake computes, in numpy
- `deps`                the learner's earlier steps that a step uses, and their verdicts
- `report`              the per-part verdict lines and the exit code
- `warmup`, `compiled`   kernel compiles ahead of time, whole-model graphs
"""

import os as _os

# Run learner code on MAX's eager interpreter alone. The default executor also
# compiles every new graph in background processes, which on a 2-core machine
# halves the speed of the kernel compiles a first check waits for (measured:
# 304 s -> 155 s for a cold step 07), and its results are never used here.
# Set before MAX is imported, and inherited by the warm-up workers.
_os.environ.setdefault("MAX_EAGER_EXECUTOR", "interpreter")
