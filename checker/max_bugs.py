"""A minimal reproduction of the MAX 26.7 compiler fault behind "compiled-mask-lost".

    python -m checker.max_bugs        prints what MAX computes and exits 1 while the fault is there

An elementwise op between a [1, T] and a [T, 1] tensor (an outer broadcast,
as in `key <= query` for a causal mask) whose [T, T] result is then
broadcast over more axes, in a graph compiled with a symbolic T, reads
element 0 of both operands for every output element. With T fixed at
compile time, or run op by op, or with no further broadcast, it is right.

Plain `max.graph`, no course code: x [H, T, T] (zeros) + (a[1, T] - b[T, 1]).
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import version

import numpy as np

import runtime

# MAX is imported inside the functions that use it: importing it takes seconds.


def outer_difference(symbolic: bool, T: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """What MAX computes for x + (a[None, :] - b[:, None]), and what it should be; [H, T, T]."""
    from max.driver import CPU, Buffer
    from max.dtype import DType
    from max.engine import InferenceSession
    from max.graph import DeviceRef, Graph, TensorType, ops

    cpu = DeviceRef.CPU()
    n = "T" if symbolic else T
    types = [TensorType(DType.float32, ["H", n, n], device=cpu), TensorType(DType.float32, [n], device=cpu),
             TensorType(DType.float32, [n], device=cpu)]
    with Graph(f"outer_difference_{'symbolic' if symbolic else 'static'}", input_types=types) as graph:
        x, a, b = (value.tensor for value in graph.inputs)
        t = a.shape[0]
        graph.output(x + (ops.reshape(a, [1, t]) - ops.reshape(b, [t, 1])))
    x = np.zeros((2, T, T), np.float32)
    a = np.arange(T, dtype=np.float32) * 10
    b = np.arange(T, dtype=np.float32) + 100
    model = InferenceSession(devices=[CPU()]).load(graph)
    got = model.execute(*(Buffer.from_numpy(v) for v in (x, a, b)))[0].to_numpy()
    return got, x + (a[None, :] - b[:, None])


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m checker.max_bugs", description=__doc__.split("\n\n")[0]).parse_args(argv)
    runtime.setup()

    print(f"MAX {version('max')}: x[H, T, T] + (a[1, T] - b[T, 1]), a = 0, 10, 20, 30; "
          "b = 100, 101, 102, 103")
    faulty = False
    for symbolic in (False, True):
        got, want = outer_difference(symbolic)
        right = np.array_equal(got, want)
        faulty |= not right
        print(f"  T {'symbolic' if symbolic else 'fixed   '}: row 1 = {got[0, 1].tolist()}  "
              f"{'right' if right else f'WRONG, expected {want[0, 1].tolist()}'}")
    print("The fault is there." if faulty else "MAX computes it right: the fault is fixed in this version.")
    return 1 if faulty else 0


if __name__ == "__main__":
    sys.exit(main())
