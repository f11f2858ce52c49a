"""Numpy arrays into MAX tensors for the learner's code, and what it returns back into numpy.

    tensor(a)            float32 array [...] -> MAX Tensor [...] on the CPU
    int_tensor(a)        token ids or positions [...] -> int64 MAX Tensor [...]
    to_numpy(value, ..)  the learner's returned Tensor -> float64 array, or a LearnerError saying what it is
"""

from __future__ import annotations

import numpy as np

from runtime import learner
from runtime.learner import LearnerError

# MAX is imported inside the functions that use it: importing it takes seconds.


def tensor(a: np.ndarray):
    """A float32 numpy array as a MAX tensor on the CPU."""
    from max.experimental.tensor import Tensor

    return Tensor.from_dlpack(np.ascontiguousarray(a, dtype=np.float32))


def int_tensor(a: np.ndarray):
    """Token ids (or positions) as an int64 MAX tensor on the CPU."""
    from max.experimental.tensor import Tensor

    return Tensor.from_dlpack(np.ascontiguousarray(a, dtype=np.int64))


def to_numpy(value, what: str) -> np.ndarray:
    """A MAX tensor returned by learner code as float64 numpy, or a LearnerError saying what it is."""
    from max.experimental.tensor import Tensor

    if value is None:
        raise LearnerError(f"{what} returned None: is a `return` missing?")
    if isinstance(value, (list, tuple)):
        raise LearnerError(f"{what} returned a {type(value).__name__}; return one Tensor")
    if isinstance(value, np.ndarray):
        raise LearnerError(f"{what} returned a numpy array; build the result with MAX Tensor operations")
    if not isinstance(value, Tensor):
        raise LearnerError(f"{what} returned {type(value).__name__}, not a max Tensor")
    try:
        array = np.from_dlpack(value)
    except Exception as e:
        raise learner.explain(e) from None
    if array.dtype != np.float32:
        raise LearnerError(f"{what} returned a {array.dtype} Tensor of shape {list(array.shape)}, expected float32 "
                           "(GPT-2 runs in float32 here: look for the op that changed the dtype)")
    return array.astype(np.float64)
