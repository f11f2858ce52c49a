"""Running a learner's Mojo kernel safely: in a child process, with its compile errors made short.

A kernel indexes memory by hand, so a wrong index can crash the process that runs it (a read past a
tensor's end), and a loop whose index never grows never returns. `run_kernel` runs a learner's function
that calls their kernel in a child Python on the check's inputs and reads back what it computed, so a
crash or a hang becomes a verdict instead of ending the check:

    arrays    {name: [inputs]}: each case's inputs, numpy arrays, each followed in memory by GUARD NaNs
              (guarded), so a read past its end shows as NaN
    returns   {name: [R, ...]}: each case run R times (a race shows as runs that differ), and the inputs the
              kernel writes after each run

A crash ends the child, not the check: the cases after the one that crashed run again in a new child, so
that `Crashed` (a LearnerError) carries which cases crash and what the kernel computed on the others,
for the step's judge to read both (a crash only where T is no multiple of 16 is a bound that overruns).

`run_probe` is steps 15 and 16's: matvec or matvec_q8 on (name, N, K, M, bias) cases, x [N, K], w [M, K]
and b [M] (or None) drawn from SEED; matvec_q8 gets w as quantize(w): q [M, K] int8, scales [M, KB].

A compile error in the Mojo comes back as runtime.learner.explain words it: the file, the line and
Mojo's message with its source line, without the mojo command line and its warnings.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import runtime
from checker.running.paged_graph import paged
from runtime.learner import LearnerError, call, explain, import_step, limit_hit
from runtime.paths import REPO
from runtime.quantize import quantize

# MAX is imported inside the functions that use it: importing it takes seconds.

SEED = 15
NOT_WRITTEN = "not implemented yet"
REPEATS = 5  # runs of each case: a race shows in some runs only (a decode split reading position P before it
# is stored: about a third of calls on 2 cores)
# Each function a probe may run: what it is handed beside x and b, and the indices a crash points to.
INDICES = {"matvec": "rows of w below M, columns below K, y's index below N * M",
           "matvec_q8": "rows of q below M, columns below K, scales' index below M * KB (KB = ceil(K / 32)), "
                        "y's index below N * M"}

def case_arrays(n: int, k: int, m: int, bias: bool, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """x [N, K], w [M, K], b [M] (or None): standard normal float32, the same in parent and child."""
    rng = np.random.default_rng([seed, n, k, m])
    x = rng.standard_normal((n, k), dtype=np.float32)
    w = rng.standard_normal((m, k), dtype=np.float32)
    return x, w, rng.standard_normal(m, dtype=np.float32) if bias else None


GUARD = 64  # values before and after each input that a kernel must never read


def guarded(a: np.ndarray) -> np.ndarray:
    """`a` in a buffer with GUARD values on each side: NaN for floats, the largest value for integers, so
    that a kernel reading outside a tensor (the row after the last, one scale too many, index -1) shows in
    its outputs instead of reading whatever memory held there."""
    fill = np.nan if a.dtype.kind == "f" else np.iinfo(a.dtype).max
    buffer = np.full(a.size + 2 * GUARD, fill, dtype=a.dtype)
    buffer[GUARD:GUARD + a.size] = a.ravel()
    return buffer[GUARD:GUARD + a.size].reshape(a.shape)


def kernel_args(function: str, x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> list[np.ndarray]:
    """What `function` is called with for one case: x, w, b; for matvec_q8, x, q, scales, b."""
    weights = list(quantize(w)) if function == "matvec_q8" else [w]
    return [x, *weights, *([] if b is None else [b])]


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def run_probe(path: Path, cases: list[tuple[str, int, int, int, bool]], *, timeout: float,
              function: str = "matvec") -> dict[str, np.ndarray]:
    """Steps 15 and 16: the learner's matvec or matvec_q8 on each case (x, w, b drawn from SEED), REPEATS times,
    in a child process: {name: [R, N, M]}. Raises LearnerError for what stopped it (run_kernel)."""
    arrays = {name: kernel_args(function, *case_arrays(n, k, m, bias, SEED)) for name, n, k, m, bias in cases}
    return run_kernel(path, function, arrays, timeout=timeout, indices=INDICES[function])


class Crashed(LearnerError):
    """The kernel crashed the process that ran it on the cases `crashed` (names, in the order run; `signal`:
    SIGSEGV, ...) of `total`; `results` holds what it computed on every other case, as run_kernel returns it;
    `indices` the indices to check, in words."""

    def __init__(self, message: str, crashed: list[str], signal_name: str, results: dict[str, np.ndarray],
                 total: int, indices: str):
        super().__init__(message)
        self.crashed, self.signal, self.results = crashed, signal_name, results
        self.total, self.indices = total, indices


def run_kernel(path: Path, function: str, arrays: dict[str, list[np.ndarray]], *, timeout: float,
               writes: tuple[int, ...] = (), indices: str, about: dict[str, str] | None = None,
               compiled: bool = False) -> dict[str, np.ndarray]:
    """The learner's `function` (from step file `path`) on each case's inputs `arrays[name]`, REPEATS times,
    in a child process, each input GUARDed, a fresh copy of each input a run: {name: [R, ...]} its output in
    each run, and {"name#i": [R, ...]} input i after each run for each i in `writes` (a kernel that writes
    into an input: step 17's caches). `compiled`: the function is step 18's paged attention, called inside a
    graph built around the case's pool (checker.running.paged_graph). Raises LearnerError for what stopped
    it: a compile error, an exception, the time limit (over every child); Crashed when it crashed on some
    cases, after running the others (`indices` says which indices to check)."""
    about = about or {}
    results, crashed, signal_name, started = {}, [], "", time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        inputs = Path(tmp) / "inputs.npz"
        np.savez(inputs, **{f"{name}#{i}": a for name, args in arrays.items() for i, a in enumerate(args)})
        todo = list(arrays)
        while todo:
            left = timeout - (time.monotonic() - started)
            ran, code = _run_child(Path(tmp) / f"child{len(crashed)}", path, function, todo, inputs, writes, about,
                                   compiled, left, len(arrays))
            results.update(ran)
            if code is None:
                break
            case = todo[len([name for name in todo if name in ran])]  # the first case without its outputs
            crashed.append(case)
            signal_name = _signal_name(code)
            todo = [name for name in todo[todo.index(case) + 1:] if name not in ran]
    if not crashed:
        return results
    listed = "; ".join(about.get(name, name) for name in crashed)
    where = (f"on every one of the {len(arrays)} cases" if len(crashed) == len(arrays) else
             f"on {len(crashed)} of the {len(arrays)} cases: {listed}; it ran the other {len(arrays) - len(crashed)} "
             "to the end")
    if len(crashed) == len(arrays) == 1:
        where = f"on {listed}"
    raise Crashed(f"your kernel crashed the process that ran it ({signal_name}) {where}: a read or write outside a "
                  f"tensor. Check each index against the tensor's size: {indices}", crashed, signal_name, results,
                  len(arrays), indices)


def _run_child(tmp: Path, path: Path, function: str, cases: list[str], inputs: Path, writes: tuple[int, ...],
               about: dict[str, str], compiled: bool, timeout: float, total: int) -> tuple[dict, int | None]:
    """One child on `cases`, in order: what it computed on the cases it finished, and the signal's (negative)
    return code if it crashed (None if it ran them all). Raises LearnerError for anything else that stopped it."""
    tmp.mkdir()
    spec, out = tmp / "spec.json", tmp / "out"
    spec.write_text(json.dumps({"path": str(path), "function": function, "cases": cases, "inputs": str(inputs),
                                "writes": list(writes), "repeats": REPEATS, "about": about, "compiled": compiled}))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    try:
        done = subprocess.run([sys.executable, "-m", "checker.running.mojo", str(spec), str(out)],
                              capture_output=True, text=True, timeout=max(timeout, 1.0), env=env, cwd=REPO)
    except subprocess.TimeoutExpired:
        limit_hit()
        finished = sum((out / f"{i}.npz").exists() for i in range(len(cases)))
        where = (f": it had gone through {total - len(cases) + finished} of them and was still running "
                 f"{about.get(cases[finished], cases[finished])}" if finished or len(cases) < total else "")
        raise LearnerError(f"your kernel did not finish the {total} cases in {timeout:.0f} s (its build "
                           f"included){where}: a loop whose index never reaches its end?") from None
    error = tmp / "error.json"
    if error.exists():
        raise LearnerError(**json.loads(error.read_text()))
    ran = {}
    for index in range(len(cases)):  # each case's outputs, saved as soon as it finished
        if (saved := out / f"{index}.npz").exists():
            with np.load(saved) as data:
                ran.update({key: data[key] for key in data.files})
    if done.returncode < 0:
        return ran, done.returncode
    if done.returncode != 0 or len(ran) < len(cases):
        tail = [line for line in (done.stderr or "").splitlines() if line.strip() and "Crashpad" not in line]
        raise LearnerError(f"running your kernel failed: {tail[-1] if tail else f'exit code {done.returncode}'}")
    return ran, None


def _child(spec_file: str, out_dir: str) -> int:
    """In the child: runs each case, saves its outputs (and the inputs it writes) as it finishes it (out_dir/i.npz,
    i its place in the spec's cases); an error goes to error.json beside."""
    runtime.setup()
    spec = json.loads(Path(spec_file).read_text())
    out = Path(out_dir)
    out.mkdir(exist_ok=True)
    error = out.with_name("error.json")

    def record(e: LearnerError) -> int:
        todo = e.todo or NOT_WRITTEN in str(e)  # the skeleton's kernel raises Error("step 15: not implemented yet ...")
        error.write_text(json.dumps({"message": str(e), "todo": todo, "where": e.where}))
        return 1

    try:
        from max.experimental.tensor import Tensor

        function = spec["function"]
        step = import_step(Path(spec["path"]), "_probe_kernel")
        kernel = getattr(step, function, None)
        if kernel is None:
            raise LearnerError(f"{Path(spec['path']).name} defines no {function}")
        if spec["compiled"]:
            kernel = paged(kernel)
        with np.load(spec["inputs"]) as stored:
            cases = {name: [stored[f"{name}#{i}"] for i in range(sum(k.startswith(f"{name}#") for k in stored.files))]
                     for name in spec["cases"]}
        for index, (name, arrays) in enumerate(cases.items()):
            runs, written = [], {i: [] for i in spec["writes"]}
            for _ in range(spec["repeats"]):
                inputs = [guarded(a.copy()) for a in arrays]
                args = [Tensor.from_dlpack(a) for a in inputs]  # the Tensors share the guarded buffers
                y = call(kernel, *args, timeout=0, checking=Path(spec["path"]))
                if y is None:
                    raise LearnerError(f"{function}() returned None: is a `return` missing?")
                runs.append(np.from_dlpack(y).copy())
                for i in written:
                    written[i].append(inputs[i].copy())
            np.savez(out / f"{index}.npz", **{name: np.stack(runs)},
                     **{f"{name}#{i}": np.stack(w) for i, w in written.items()})
    except LearnerError as e:
        return record(e)
    except Exception as e:  # noqa: BLE001 - inside MAX, before learner code
        return record(explain(e))
    return 0


if __name__ == "__main__":
    sys.exit(_child(*sys.argv[1:3]))
