"""runtime.compiling.Compiled: a call whose arguments have the dtypes and shapes of an earlier one goes to
MAX's engine directly, with the same results as MAX's checked call; anything new is checked by MAX."""

import os
import threading
from pathlib import Path

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


def test_a_graph_is_compiled_by_one_process_at_a_time(tmp_path, monkeypatch, capfd):
    """A graph being compiled holds a lock named by its text: the same graph asked for meanwhile waits, says
    so, and is compiled (found in MAX's cache) after; another graph does not wait."""
    import threading

    from runtime import compiling

    monkeypatch.setattr(compiling, "COMPILING", tmp_path)
    order, started, release = [], threading.Event(), threading.Event()

    class Session:  # MAX's session, as OneAtATime sees it: the first compile lasts until released
        def compile_reusing_mefs(self, graph):
            order.append(f"{graph} starts")
            if len(order) == 1:
                started.set()
                release.wait(20)
            order.append(f"{graph} ends")
            return graph

    def compile_in_thread(graph):
        thread = threading.Thread(target=compiling.OneAtATime(Session()).compile_reusing_mefs, args=(graph,))
        thread.start()
        return thread

    first = compile_in_thread("graph X")
    assert started.wait(20)
    same, other = compile_in_thread("graph X"), compile_in_thread("graph Y")
    other.join(20)
    same.join(3.5)  # past the 3 s after which a waiting compile says why
    assert same.is_alive() and order == ["graph X starts", "graph Y starts", "graph Y ends"], order
    assert "another process is compiling this same graph" in capfd.readouterr().err
    release.set()
    first.join(20), same.join(20)
    assert order[3:] == ["graph X ends", "graph X starts", "graph X ends"], order


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="thread priorities are read from Linux's /proc")
def test_the_sessions_runtime_threads_give_way_to_python(compiled):
    """Once the compiled runs' session exists, MAX's runtime threads are at runtime.threads.NICENESS (they spin
    between ops) and the Python thread that runs the decode loop is not."""
    from runtime.threads import NICENESS, runtime_threads

    tids = runtime_threads()
    assert tids, "no MAX runtime thread (named ThreadN) found in this process"
    assert {os.getpriority(os.PRIO_PROCESS, tid) for tid in tids} == {NICENESS}
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) < NICENESS
