"""Compiling MAX's eager kernels ahead of the first check, two at a time.

The checks run the learner's code eagerly, op by op: that is what makes a
re-run after an edit take seconds, because MAX caches each op's compiled
kernel on disk (in `~/.cache/modular`) no matter which graph used it. The
price is the first use of each op on a machine, ~20-70 s each, one after
another. Before the first check of a step this module compiles the ops the
step's solution uses in two worker processes at once (CI and learners' laptops
have at least 2 cores), and stamps MAX's cache so it happens once.

A learner's code may use an op the solution does not (`F.concat`, say): MAX
compiles it on first use, and `announce_compiles` says so while it happens.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from importlib.metadata import version
from pathlib import Path

import numpy as np

import runtime
from runtime.mojo_modules import build_once
from runtime.paths import save

# MAX is imported inside the functions that use it: importing it takes seconds.

# The eager ops each step's solution runs, and roughly how long each took to
# compile on a 2-core CPU, in seconds (the first use on a machine).
COST = {"matmul": 73, "band_part": 42, "softmax": 36, "div": 33, "add": 30, "mul": 30, "split": 25,
        "mean": 24, "sub": 25, "sqrt": 25, "gelu": 30, "gather": 30, "transpose": 19, "broadcast_to": 18,
        "compared_positions": 90, "cast": 16, "arange": 14}
_ATTENTION = ("matmul", "band_part", "transpose", "broadcast_to", "add", "div", "split", "softmax")
_LAYER_NORM = ("mean", "sub", "mul", "sqrt", "div", "add")
_MLP = ("matmul", "add", "gelu")
OPS = {
    "02": ("broadcast_to", "band_part"),
    "03": _LAYER_NORM,
    "04": _MLP,
    "05": ("gather",),
    "06": ("gather",),
    "07": (*_ATTENTION, "mul"),
    "08": (*_ATTENTION, *_LAYER_NORM, *_MLP),
    "09": (*_ATTENTION, *_LAYER_NORM, *_MLP),
    "10": (*_ATTENTION, *_LAYER_NORM, *_MLP, "gather"),
    "11": (*_ATTENTION, *_LAYER_NORM, *_MLP, "gather"),
}
# The test suite's default tier: step 11's, and what the mistakes it makes bring besides (a mask of
# positions compared, a cast, a float arange), each compiled once here instead of by both of pytest's
# workers at once.
OPS["suite"] = (*OPS["11"], "compared_positions", "cast", "arange")


def groups(step: str) -> list[list[str]]:
    """The step's ops split into two lists of about equal compile time, longest first."""
    halves: list[list[str]] = [[], []]
    for op in sorted(set(OPS.get(step, ())), key=COST.get, reverse=True):
        min(halves, key=lambda h: sum(COST[o] for o in h)).append(op)
    return [h for h in halves if h]


def _run_op(name: str) -> None:
    from max.driver import CPU
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.tensor import Tensor

    a = Tensor.from_dlpack(np.ones((2, 2, 2), dtype=np.float32))
    op = {
        "matmul": lambda: a @ a,
        "transpose": lambda: a.transpose(-1, -2),
        "broadcast_to": lambda: F.broadcast_to(Tensor(1.0, dtype=DType.float32, device=CPU()), [2, 2]),
        "band_part": lambda: F.band_part(a, num_lower=None, num_upper=0, exclude=True),
        "add": lambda: a + a,
        "div": lambda: a / 2.0,
        "mul": lambda: a * 2.0,
        "split": lambda: F.split(a, [1, 1], axis=-1)[0],
        "softmax": lambda: F.softmax(a, axis=-1),
        "gather": lambda: F.gather(a, Tensor.from_dlpack(np.zeros((2, 2), dtype=np.int64)), axis=0),
        "mean": lambda: a.mean(axis=-1),
        "sub": lambda: a - a,
        "sqrt": lambda: F.sqrt(a),
        "gelu": lambda: F.gelu(a, approximate="tanh"),
        "compared_positions": lambda: _compared_positions(),
        "cast": lambda: a.cast(DType.float64),
        "arange": lambda: Tensor.arange(0, 4),
    }[name]
    np.from_dlpack(op())


def _compared_positions():
    """A mask from key and query positions compared, as a learner may build one (step 02's mistakes): int64
    aranges, adds and broadcasts, comparisons, a where."""
    from max.driver import CPU
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.tensor import Tensor

    q = Tensor.arange(0, 3, dtype=DType.int64, device=CPU()).reshape([-1, 1])
    k = Tensor.arange(0, 4, dtype=DType.int64, device=CPU()).reshape([1, -1])
    zeros = F.broadcast_to(Tensor(0.0, dtype=DType.float32, device=CPU()), [3, 4])
    masked = F.broadcast_to(Tensor(float("-inf"), dtype=DType.float32, device=CPU()), [3, 4])
    for allowed in (k < q + 1, k <= q + 1, F.broadcast_to(Tensor(1, dtype=DType.int64, device=CPU()), [3, 4]) > k):
        np.from_dlpack(F.where(allowed, zeros, masked))
    return zeros


def _stamp() -> Path:
    try:
        from max._interpreter_ops.gc_compile import _cache_dir

        root = _cache_dir()
    except Exception:
        root = None
    root = Path(root) if root else Path.home() / ".cache" / "modular" / ".max_cache"
    return root / "gpt2-course-warm.json"


def _warmed() -> dict:
    try:
        return json.loads(_stamp().read_text())
    except (OSError, ValueError):
        return {}


def start(step: str) -> list[subprocess.Popen]:
    """Starts the workers for `step` if its ops are not compiled yet; returns them."""
    if step not in OPS or _warmed().get(step) == version("max"):
        return []
    print(
        f"First {'check of step ' + step if step.isdigit() else 'run of the test suite'} on this machine: compiling "
        "MAX kernels for its operations (once, 2-3 minutes on 2 cores)...",
        file=sys.stderr,
        flush=True,
    )
    build_once()  # before the workers import MAX side by side
    return [
        subprocess.Popen([sys.executable, "-m", "checker.warmup", *group], stdout=subprocess.DEVNULL)
        for group in groups(step)
    ]


def finish(step: str, workers: list[subprocess.Popen]) -> None:
    """Waits for the workers and stamps the cache if they all succeeded."""
    if not workers:
        return
    started = time.perf_counter()
    if all(w.wait() == 0 for w in workers):
        save(_stamp(), lambda tmp: tmp.write_text(json.dumps(_warmed() | {step: version("max")})))
        print(f"...kernels ready (waited {time.perf_counter() - started:.0f} s more).", file=sys.stderr, flush=True)


def announce_compiles() -> None:
    """Says so when MAX spends more than a few seconds compiling an eager op on the fly.

    Hooks a private MAX function; if it moves, the checks run the same, unannounced.
    """
    try:
        from max._interpreter_ops import gc_compile
    except ImportError:
        return
    original = getattr(gc_compile, "compile_single_target", None)
    if original is None or getattr(original, "_announced", False):
        return

    def announced(family, key, device, build):
        notice = threading.Timer(
            3.0,
            lambda: print(f"(compiling a MAX kernel for {key}: the first use of this op "
                          "on this machine, ~20-70 s, once)", file=sys.stderr, flush=True),
        )
        notice.start()
        try:
            return original(family, key, device, build)
        finally:
            notice.cancel()

    announced._announced = True
    gc_compile.compile_single_target = announced


if __name__ == "__main__":  # a worker: compiles the kernels of the ops named
    _ops = argparse.ArgumentParser(prog="python -m checker.warmup", description="Compiles MAX's eager kernels "
                                   "for these ops (the checks start two such workers themselves).")
    _ops.add_argument("ops", nargs="+", choices=sorted(COST))
    runtime.setup()
    for name in _ops.parse_args().ops:
        _run_op(name)
