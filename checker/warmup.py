"""Compiling MAX's eager kernels in one batch, before the first check needs them.

The checks run the learner's code eagerly, op by op: a re-run after an edit
takes seconds because MAX keeps each op's compiled kernel. MAX compiles an
op's kernel on its first use, alone: 20-70 s each on 2 cores, nearly all of it
a cost paid once per compile, not per op. So this module compiles the kernels
the course uses together. A small program per op (`_programs`) runs with MAX's
per-op compile intercepted, which collects the graph MAX would have compiled;
on a machine's first check two worker processes compile one half of them each
as one module (2-3 minutes for the 41, against ~25 one at a time) and keep
the result as MAX artifacts (`.mef`), which every check, and the explore
commands, load into MAX's op caches (`runtime.eager_kernels`, a fraction of a
second) before they run the learner's code.

A learner's code may use an op outside `_programs` (`F.cumsum`, say): MAX
compiles it on first use, as before, and `announce_compiles` says so while it
happens. If MAX's internals this leans on move, `load` loads nothing and MAX
compiles every op on first use: slower the first time, the same checks.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import numpy as np

import runtime
from runtime import eager_kernels
from runtime.mojo_modules import build_once
from runtime.paths import save

# MAX is imported inside the functions that use it: importing it takes seconds.


def _runs_max(step: str) -> bool:
    """Whether a check of `step` ("suite": the test suite) runs MAX ops: all but step 01's (the config).
    Steps 12-17 run the learner's model op by op too, before they compile it."""
    return step != "01"


def _programs() -> dict[str, Callable[[], object]]:
    """One program per kernel the course's eager code reaches (an op, its dtype, for some its rank): the
    solutions of steps 02-11, the default test tier's mistakes, and what learners commonly write instead
    (`** 2`, `tanh`, `erf`, a slice, a max, `F.where`). Inputs come from numpy and share one shape, so
    each program needs its op's kernel alone."""
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental import random
    from max.experimental.tensor import Tensor

    def x(*shape):  # float32, [2, 2, 2] unless told
        return Tensor.from_dlpack(np.ones(shape or (2, 2, 2), dtype=np.float32))

    def n(dtype=np.int64):  # integers [3, 4]
        return Tensor.from_dlpack(np.arange(12, dtype=dtype).reshape(3, 4))

    def mask():  # bool [3, 4]
        return Tensor.from_dlpack(np.arange(12).reshape(3, 4) % 2 == 0)

    return {
        "matmul": lambda: x() @ x(),
        "add": lambda: x() + x(),
        "sub": lambda: x() - x(),
        "mul": lambda: x() * x(),
        "div": lambda: x() / x(),
        "pow": lambda: x() ** x(),
        "negate": lambda: -x(),
        "broadcast_to": lambda: F.broadcast_to(x(1, 2), [2, 2]),
        "transpose": lambda: x().transpose(-1, -2),
        "band_part": lambda: F.band_part(x(), num_lower=None, num_upper=0, exclude=True),
        "split": lambda: F.split(x(), [1, 1], axis=-1)[0],
        "slice": lambda: x()[:, :, :1],
        "slice of heads": lambda: x(2, 2, 2, 2)[:, :1],
        "softmax": lambda: F.softmax(x(), axis=-1),
        "mean": lambda: x().mean(axis=-1),
        "sqrt": lambda: F.sqrt(x()),
        "rsqrt": lambda: F.rsqrt(x()),
        "concat": lambda: F.concat([x(), x()], axis=-1),
        "sum": lambda: x().sum(axis=-1),
        "max": lambda: x().max(axis=-1),
        "exp": lambda: F.exp(x()),
        "tanh": lambda: F.tanh(x()),
        "erf": lambda: F.erf(x()),
        "gelu": lambda: F.gelu(x(), approximate="tanh"),
        "exact gelu": lambda: F.gelu(x()),
        "silu": lambda: F.silu(x()),
        "relu": lambda: F.relu(x()),
        "gather": lambda: F.gather(x(), Tensor.from_dlpack(np.zeros((2, 2), dtype=np.int64)), axis=0),
        "cast": lambda: x().cast(DType.float64),
        "arange": lambda: Tensor.arange(0, 4),
        "normal": lambda: random.normal([2, 2]),
        "where": lambda: F.where(mask(), x(3, 4), x(3, 4)),
        "not": lambda: F.logical_not(mask()),
        "broadcast a mask": lambda: F.broadcast_to(Tensor.from_dlpack(np.ones((1, 4), dtype=bool)), [3, 4]),
        "integer add": lambda: n() + n(),
        "integer mul": lambda: n() * n(),
        "integer compare": lambda: n() > n(),
        "integer compare or equal": lambda: n() >= n(),
        "integer broadcast": lambda: F.broadcast_to(Tensor.from_dlpack(np.arange(4).reshape(1, 4)), [3, 4]),
        "integer slice": lambda: n()[1:, :2],
        "index add": lambda: n(np.uint64) + n(np.uint64),
    }


class _Recorded(Exception):
    """Raised in place of MAX's per-op compile: the op's graph was recorded, not compiled."""


def _compile(half: int) -> None:
    """A worker: compiles the kernels of `halves(programs)[half]` together and keeps them as MAX artifacts
    (`.mef`) in MAX's cache folder (`runtime.eager_kernels.folder()`), with a list of which op kernel each holds.

    Each round runs the programs with MAX's per-op compile swapped for one that records the graph of the
    kernel an op lacks into one module and stops the program there; the module is then compiled in one
    go, exported, and its kernels put in MAX's op caches. A program needing several kernels (`normal`:
    a broadcast, an index add, the draw) gets further each round.
    """
    from max._interpreter_ops import gc_compile
    from max._mlir_context import ensure_default_mlir_context
    from max.graph import Module

    programs = _programs()
    names = halves(list(programs))[half]
    compile_one = gc_compile.compile_single_target
    kept: dict[str, list[tuple[str, str]]] = {}  # artifact file -> [(op family, kernel)]
    while True:
        with ensure_default_mlir_context():
            module = Module()
        recorded: dict[str, tuple] = {}

        def record(family, key, device, build):
            if key not in recorded:
                with ensure_default_mlir_context():
                    build(module)
                recorded[key] = (family, device)
            raise _Recorded(key)

        gc_compile.compile_single_target = record
        try:
            for name in names:
                with contextlib.suppress(Exception):
                    programs[name]()
        finally:
            gc_compile.compile_single_target = compile_one
        if not recorded:
            break
        session = gc_compile.session_for(next(iter(recorded.values()))[1])
        with ensure_default_mlir_context():
            compiled = session.compile(module)
        artifact = f"eager-{half}-{len(kept)}.mef"
        save(eager_kernels.folder() / artifact, lambda tmp: compiled.export_mef(tmp))
        models = session.init_all(compiled)
        for key, (family, _) in recorded.items():
            family.cache[key] = models[key]
        kept[artifact] = [(family.name, key) for key, (family, _) in recorded.items()]
    eager_kernels.keep(half, _edition(), kept)


def halves(names: list[str]) -> list[list[str]]:
    """The programs' names, in `_programs()`'s order, cut in two, one half per worker, where the halves
    take about as long to compile (matmul, the reductions and the rearranging ops cost most). `normal`
    needs the kernels of an integer broadcast and an index add first, so it stays in the half with theirs."""
    cut = names.index("concat")
    return [names[:cut], names[cut:]]


def _edition() -> str:
    """What the artifacts were made with: MAX's version and this module's text (its programs)."""
    return f"{version('max')} {hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]}"


def load(step: str) -> int:
    """Before a check of `step` runs the learner's code: the course's kernels into MAX's op caches
    (`runtime.eager_kernels`); how many. 0 for step 01."""
    return eager_kernels.load() if _runs_max(step) else 0


def start(step: str) -> list[subprocess.Popen]:
    """Starts the two workers if a check of `step` runs MAX ops and the artifacts are missing; returns them."""
    if not _runs_max(step) or eager_kernels.manifests(_edition()) is not None:
        return []
    print(
        f"First {'check' if step.isdigit() else 'run of the test suite'} on this machine: compiling the MAX "
        "kernels of the course's operations (once, 2-3 minutes on 2 cores)...",
        file=sys.stderr,
        flush=True,
    )
    build_once()  # before the workers import MAX side by side
    return [subprocess.Popen([sys.executable, "-m", "checker.warmup", str(half)], stdout=subprocess.DEVNULL)
            for half in eager_kernels.HALVES]


def finish(workers: list[subprocess.Popen]) -> None:
    """Waits for the workers."""
    if not workers:
        return
    started = time.perf_counter()
    if all(w.wait() == 0 for w in workers):
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


if __name__ == "__main__":  # a worker: compiles one half of the programs' kernels
    _half = argparse.ArgumentParser(prog="python -m checker.warmup", description="Compiles one half of the "
                                    "course's eager MAX kernels (the checks start both workers themselves).")
    _half.add_argument("half", type=int, choices=(0, 1))
    runtime.setup()
    _compile(_half.parse_args().half)
