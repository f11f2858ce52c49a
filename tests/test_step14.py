"""Step 14: the served model. One real `max serve` of the solution per test session (the check's served
part), requests from the openai client against transformers, and no process left behind."""

import re
import subprocess

import pytest

from checker.references import ragged
from checker.reporting.report import FAIL, PASS, TODO
from checker.steps.step14 import check as step14
from checker.steps.step14 import served as step14_served
from runtime import server as server_module
from runtime.paths import REPO
from runtime.server import Server, ServerError, free_port

SOLUTION = REPO / "solutions" / "solution_14.py"


def _servers(port: int) -> str:
    """The processes of the server on `port` (other tests' servers run beside it under xdist)."""
    return subprocess.run(["pgrep", "-af", f"gpt2_arch.*--port {port}$"], capture_output=True, text=True).stdout


def test_a_real_server_answers_like_transformers(checkpoint, server_slot, monkeypatch):
    """Greedy, streaming, 8 concurrent, 4xx for a request past n_positions and for invalid parameters."""
    port = free_port()
    monkeypatch.setattr(server_module, "free_port", lambda: port)
    part = step14_served.served_part(SOLUTION, checkpoint)
    assert part.status == PASS, "\n".join([part.summary, *part.details])
    assert sum(d.startswith("ok ") for d in part.details) == 8, part.details
    assert not _servers(port), "a server was left running"


def test_a_server_that_cannot_start_says_why_and_leaves_nothing(checkpoint, server_slot, tmp_path):
    broken = tmp_path / "step_14.py"
    broken.write_text(SOLUTION.read_text().replace("class GPT2Paged(Module):", "class GPT2Paged(Module)"))
    (tmp_path / "step_11.py").write_text((REPO / "solutions" / "solution_11.py").read_text())
    server = Server(broken, checkpoint.path, limit=300, quiet=True)
    with pytest.raises(ServerError) as e:
        with server:
            pass
    assert "before it was ready" in str(e.value) and "SyntaxError" in str(e.value), str(e.value)
    assert not _servers(server.port), "a server was left running"


def test_the_skeleton_is_todo(checkpoint):
    report = step14.check(REPO / "steps" / "step_14.py", checkpoint)
    assert report.part("ragged positions").status == TODO, report.render()
    assert report.part("paged model").status == TODO, report.render()


def test_positions_mistakes_are_computed_not_guessed():
    right = ragged.positions(ragged.OFFSETS, ragged.CACHED)
    assert right.tolist() == [0, 1, 2, 3, 4, 7, 0, 1, 2, 3, 3]
    checked = ragged.positions(ragged.CHECKED_OFFSETS, ragged.CHECKED_CACHED)
    assert checked.tolist() == [*right.tolist(), 16, 17, 18]  # the worked example, then a chunk after a cache
    for rule in ("not-offset", "batch-rows"):
        assert ragged.positions(ragged.OFFSETS, ragged.CACHED, rule).tolist() != right.tolist()


def test_positions_of_a_chunk_after_its_cache_are_checked():
    """A chunk of a prompt after its cached part (chunked prefill, a prefix cache hit): positions that only a
    request with a cache and several new rows tells apart from the right ones fail the positions part."""
    source = (REPO / "solutions" / "solution_14.py").read_text()
    right = "    return rows - first_row + cached"
    assert source.count(right) == 1
    namespace: dict = {}
    exec(compile(source.replace(right, "    return F.where(cached > 0, cached, rows - first_row)"),
                 "solution_14.py, a cached request's rows all at its cache's length", "exec"), namespace)

    class Run:  # what the part needs of StepRun
        def call(self, fn, *args):
            return fn(*args)

        def add(self, part):
            return part

    from solutions.solution_14 import ragged_positions

    assert step14._positions_part(Run(), ragged_positions).status == PASS
    part = step14._positions_part(Run(), namespace["ragged_positions"])
    assert part.status == FAIL and "expected [0, 1, 2, 3, 4, 7, 0, 1, 2, 3, 3, 16, 17, 18]" in part.summary, part


def test_serve_command_prints_the_url_and_a_kill_stops_it_all(checkpoint, server_slot):
    """pixi run serve prints the URL, the curl line and the gibberish note; a SIGTERM to it alone (a `kill`,
    not Ctrl-C to its process group) stops max serve too."""
    import os
    import signal
    import sys
    import time

    env = {**os.environ, "GPT2_WEIGHTS": "synthetic", "PYTHONPATH": str(REPO)}
    wrapper = subprocess.Popen([sys.executable, "-m", "gpt2_arch", "--solutions"], cwd="/", env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out, end = "", time.monotonic() + 900
    try:
        while "Ctrl-C stops" not in out and time.monotonic() < end and wrapper.poll() is None:
            out += wrapper.stdout.readline()
        assert "http://127.0.0.1:" in out and "curl " in out and "gibberish" in out, out
        port = int(re.search(r"http://127\.0\.0\.1:(\d+)", out).group(1))
        assert _servers(port), "no server on the printed port"
        wrapper.send_signal(signal.SIGTERM)
        assert wrapper.wait(timeout=60) == 128 + signal.SIGTERM
        assert not _servers(port), "a server was left running after a SIGTERM to pixi run serve"
    finally:
        if wrapper.poll() is None:
            wrapper.kill()


def test_a_model_right_on_two_blocks_but_not_on_twelve_fails_served(checkpoint, server_slot, write_step, monkeypatch):
    """Blocks 2 and up store and read block 1's cache: the paged part (2 blocks) cannot see it, the real
    server (every block) must."""
    wrong = SOLUTION.read_text().replace("layer_idx = Tensor(layer,", "layer_idx = Tensor(min(layer, 1),")
    assert wrong != SOLUTION.read_text()
    monkeypatch.setenv("GPT2_CHECK_SERVE", "1")
    port = free_port()
    monkeypatch.setattr(server_module, "free_port", lambda: port)
    report = step14.check(write_step(wrong, "step_14.py"), checkpoint)
    assert report.part("paged model").status == PASS, report.render()
    served = report.part("served")
    assert served.status == FAIL, report.render()
    assert any(d.startswith("FAIL greedy completions") for d in served.details), report.render()
    assert any(d.startswith("ok   the server goes on serving") for d in served.details), report.render()
    assert "its layer_idx" in served.details[-1], report.render()
    assert not _servers(port), "a server was left running"


def test_a_wrong_paged_model_is_told_op_by_op_before_any_compile(checkpoint, write_step, monkeypatch):
    """A change MAX has not compiled costs about a minute's compile: a wrong model is told op by op first,
    MAX's paged kernels stood in for (checker.running.paged), and placed as the compiled graph places it."""
    wrong = SOLUTION.read_text().replace("scale=1 / math.sqrt(attn.head_dim)",
                                         "scale=1 / (math.sqrt(attn.head_dim) + 1)")
    assert wrong != SOLUTION.read_text()
    monkeypatch.setattr(step14, "compile_probed", lambda *args: pytest.fail("the model was compiled"))
    report = step14.check(write_step(wrong, "step_14.py"), checkpoint)
    part = report.part("paged model")
    assert part.status == FAIL and step14.EAGERLY in part.details, report.render()
    assert any("block 0's attention half" in d and "the scale" in d for d in part.details), report.render()
