"""What it takes to run a GPT-2 on MAX, whoever wrote its modules: the course's commands (`gpt2`,
`gpt2_arch`, `bench`, `explore`) and its grader (`checker`) both stand on it; it imports neither.

- `paths`        where things live in the repository
- `checkpoints`  find, verify and download a GPT-2 checkpoint; `standins` makes the two offline
                 stand-ins, `files` a checkpoint's files and their sums
- `learner`      import a step file from its path and call into it: time limits, errors worded for a
                 learner (`compat`: the online book's older MAX names, resolved)
- `loading`      a checkpoint's weights into a learner's modules (Hugging Face's names, Conv1D transposed)
- `online_book`  running files written to the online book's contracts (its model class, its generate)
- `compiling`    a model compiled whole: with a KV cache, for decode alone, prefill then decode
- `decoding`     greedy loops over a compiled model, and decode rates timed side by side
- `tokenizer`    a checkpoint's tokenizer; `hf` Hugging Face's GPT-2 on the same checkpoint
- `quantize`     8-bit blocks (Q8_0) in numpy; `bandwidth` the bytes a decode step reads, and the
                 machine's read bandwidth
- `kernels`      a Mojo kernel folder handed to MAX at a path named by its content: compiled once
- `eager_kernels` the course's eager kernels, compiled together by the checks' warm-up, loaded at once
- `server`       `max serve` of a step 14 file, started and always stopped (`guard`, `mojo_modules`)
- `threads`      MAX's spinning runtime threads lowered in priority, so the host's Python runs at once

Call `setup()` once where a process starts, before MAX is imported.
"""

import logging
import os

from runtime.kernels import by_content


def setup() -> None:
    """How this course runs MAX, set once per process before MAX is imported.

    MAX's default eager executor also compiles every new graph in background processes, whose results
    the course never uses: on a 2-core machine that halves the speed of the kernel compiles a first
    check waits for. Children (the warm-up's workers, a kernel's child process) inherit the setting.
    MAX's log line suggesting `max warm-interpreter-cache` after each on-the-fly compile is silenced.
    A Mojo kernel folder reaches MAX at a path named by its content (`kernels`): compiled once, wherever
    it lives.
    """
    os.environ.setdefault("MAX_EAGER_EXECUTOR", "interpreter")
    logging.getLogger("max._eager_policy").setLevel(logging.ERROR)
    by_content()
