"""runtime.aligned: every realized CPU parameter of a module, wherever it is kept (an attribute, a list, a
shared tensor), ends up at a cache line's start with its values, and a compiled graph computes the same.
(That MAX then reads the moved memory, not a copy: solution 18's product sees its weights on a line's start,
the performance page's "Weights on a cache line's start".)"""

import numpy as np

from runtime.aligned import ALIGN, aligned, aligned_copy


def _address(tensor) -> int:
    return np.from_dlpack(tensor).ctypes.data


def _off_line(shape, dtype, rng) -> np.ndarray:
    """A random C-contiguous array of `shape` starting 16 bytes past a cache line's start."""
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    room = np.empty(n + 2 * ALIGN, np.uint8)
    start = -room.ctypes.data % ALIGN + 16
    out = room[start:start + n].view(dtype).reshape(shape)
    out[...] = rng.integers(-100, 100, shape) if np.dtype(dtype).kind == "i" else rng.standard_normal(shape)
    return out


def _model(rng):
    from max.experimental.nn import Module, ModuleList
    from max.experimental.tensor import Tensor

    class Product(Module):
        def __init__(self, q, bias):
            self.q, self.bias = q, bias

        def forward(self, x):
            return x @ self.q.T + self.bias

    class Model(Module):
        def __init__(self):
            shared = Tensor.from_dlpack(_off_line((8, 8), np.float32, rng))
            self.first = Product(shared, Tensor.from_dlpack(_off_line((8,), np.float32, rng)))
            self.layers = [Product(Tensor.from_dlpack(_off_line((8, 8), np.float32, rng)),
                                   Tensor.from_dlpack(_off_line((8,), np.float32, rng))) for _ in range(2)]
            self.blocks = ModuleList([Product(Tensor.from_dlpack(_off_line((8, 8), np.float32, rng)),
                                              Tensor.from_dlpack(_off_line((8,), np.float32, rng)))])
            self.head = shared  # a tied weight: the first product's too
            self.table = {"int8": Tensor.from_dlpack(_off_line((4, 64), np.int8, rng))}

        def forward(self, x):
            for product in [self.first, *self.layers, *self.blocks]:
                x = product(x)
            return x @ self.head.T

    return Model()


def test_aligned_copy_starts_on_a_line_with_the_same_values():
    array = _off_line((3, 5), np.float32, np.random.default_rng(0))
    assert array.ctypes.data % ALIGN  # the case is one aligned() must move
    copy = aligned_copy(array)
    assert copy.ctypes.data % ALIGN == 0 and copy.flags.c_contiguous
    np.testing.assert_array_equal(copy, array)


def test_every_parameter_is_moved_to_a_line_and_keeps_its_values_and_sharing():
    model = _model(np.random.default_rng(1))
    before = {name: np.from_dlpack(t).copy() for name, t in model.parameters}
    assert all(_address(t) % ALIGN for _, t in model.parameters)  # every one starts off a line

    assert aligned(model) is model
    after = dict(model.parameters)
    assert after.keys() >= {"first.q", "layers.1.bias", "blocks.0.q", "head"}
    for name, tensor in after.items():
        assert _address(tensor) % ALIGN == 0, name
        np.testing.assert_array_equal(np.from_dlpack(tensor), before[name], err_msg=name)
    assert model.head is model.first.q  # still one tensor, moved once
    assert _address(model.table["int8"]) % ALIGN == 0


def test_a_compiled_graph_of_the_moved_weights_computes_the_same():
    from max.driver import CPU
    from max.dtype import DType
    from max.experimental.tensor import Tensor
    from max.graph import TensorType

    x = Tensor.from_dlpack(np.random.default_rng(2).standard_normal((3, 8)).astype(np.float32))
    kind = TensorType(DType.float32, [3, 8], device=CPU())
    expected = np.from_dlpack(_model(np.random.default_rng(3)).compile(kind)(x))
    model = aligned(_model(np.random.default_rng(3)))
    np.testing.assert_allclose(np.from_dlpack(model.compile(kind)(x)), expected, rtol=1e-6)
    assert all(_address(t) % ALIGN == 0 for _, t in model.parameters)


def test_the_served_model_has_every_weight_on_a_line(monkeypatch):
    """gpt2_arch's learner_model, on solution 18 and the stand-in checkpoint (no hub here): int8 weights made in
    numpy by the learner's code, each on a cache line's start once built."""
    from checker.steps.step14.paged import paged_params  # the cache's page size is no matter here: only built
    from gpt2_arch.model import learner_model
    from runtime.checkpoints import checkpoint_for_command
    from runtime.paths import REPO
    from runtime.server import SERVED

    checkpoint = checkpoint_for_command()
    config = checkpoint.learner_config()
    monkeypatch.setenv(SERVED, str(REPO / "solutions" / "solution_18.py"))
    weights = dict(learner_model(paged_params(config, config.n_layer), checkpoint.path).parameters)
    assert sum(np.from_dlpack(t).dtype == np.int8 for t in weights.values()) == 4 * config.n_layer + 1
    assert [name for name, t in weights.items() if _address(t) % ALIGN] == []
