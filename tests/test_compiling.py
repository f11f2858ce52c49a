"""runtime.compiling.Compiled: a call whose arguments have the dtypes and shapes of an earlier one goes to
MAX's engine directly, with the same results as MAX's checked call; anything new is checked by MAX."""

import numpy as np
import pytest

from runtime.compiling import compile_module


class _Counting:
    """A compiled callable's stand-in that counts MAX's checked calls and the engine's direct ones."""

    def __init__(self, compiled):
        self.compiled, self.checked, self.direct = compiled, 0, 0

    def __call__(self, *args):
        self.checked += 1
        return self.compiled(*args)

    def execute_raw(self, *buffers):
        self.direct += 1
        return self.compiled.execute_raw(*buffers)

    def __getattr__(self, name):
        return getattr(self.compiled, name)


@pytest.fixture(scope="module")
def compiled():
    from max.experimental.nn import Module

    class Two(Module):
        def forward(self, x, y):
            return x * 2 + y, y[:, :1]

    example = np.zeros((1, 3), np.float32)
    return compile_module(Two(), [(example, ("rows", None)), (example, ("rows", None))])


def test_a_call_seen_before_goes_to_the_engine_with_the_same_results(compiled):
    from max.experimental.tensor import Tensor

    counting = _Counting(compiled.compiled)
    compiled.compiled, compiled._seen = counting, set()
    rng = np.random.default_rng(0)
    for rows in (2, 2, 2, 5, 5):
        x, y = (rng.standard_normal((rows, 3)).astype(np.float32) for _ in range(2))
        total, first = compiled(Tensor.from_dlpack(x), Tensor.from_dlpack(y))
        np.testing.assert_array_equal(np.from_dlpack(total), x * 2 + y)
        np.testing.assert_array_equal(np.from_dlpack(first), y[:, :1])
    assert (counting.checked, counting.direct) == (2, 3)  # each shape checked once, by MAX


def test_a_wrong_argument_after_right_ones_still_gets_maxs_message(compiled):
    from max.experimental.tensor import Tensor

    right = Tensor.from_dlpack(np.ones((2, 3), np.float32))
    compiled(right, right)
    compiled(right, right)
    with pytest.raises((TypeError, ValueError)):
        compiled(right, Tensor.from_dlpack(np.ones((2, 3), np.int64)))
    with pytest.raises((TypeError, ValueError)):
        compiled(right, Tensor.from_dlpack(np.ones((2, 4), np.float32)))
