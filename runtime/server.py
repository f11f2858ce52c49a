"""A `max serve` of a step 14 file on 127.0.0.1: started on a free port, waited for, always stopped.

    with Server(step14_file, checkpoint_dir) as server:   # prints a progress line while MAX compiles
        server.client()                                   # an openai.OpenAI for server.url; model "gpt2"

The server runs in its own process group under a guard (runtime/guard.py); leaving the `with`
(normally, on an error, on Ctrl-C, a SIGTERM or SIGHUP, or at the time limit) stops the whole group,
and if this process dies without leaving it (SIGKILL), the guard stops the group: nothing is left behind.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from runtime.guard import GRACE
from runtime.mojo_modules import build_once
from runtime.paths import REPO

# openai is imported inside the functions that use it: importing it takes seconds.

MODEL = "gpt2"  # the name clients ask for, whatever checkpoint folder is served
SERVED = "GPT2_SERVED"  # environment: the step file the server's model comes from (gpt2_arch.model)
POOL = "GPT2_POOL_POSITIONS"  # environment: the positions the paged cache holds, shared (gpt2_arch.pipeline)
PAGE = 128  # positions a page of MAX's paged cache holds, served and timed (MAX 26.7's default, and its smallest)
_REFUSED = re.compile(r"WARNING: (?:(?:Input validation|Value|Request validation) error in request \S+|Refused "
                      r"request): (.*)")
START_LIMIT = 900.0  # seconds: a cold start compiles the model (~75-130 s on 2 cores) and the sampler


def same_text(served: str, expected: str) -> bool:
    """The served text is the expected ids decoded. max serve holds back the bytes of a last token that
    end inside a UTF-8 character, which tokenizer.decode shows as U+FFFD: those may be missing."""
    return served == expected or served == expected.rstrip("\ufffd")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def command(checkpoint_dir: Path, port: int, *, max_batch_size: int = 16) -> list[str]:
    """`max serve` of the GPT-2 checkpoint folder through the course's gpt2_arch package, CPU only, with
    OpenAI's completions semantics (gpt2_arch.server), every prompt row's logits kept for `echo`, under
    the guard that ends it when this process is gone. In-flight batching: a new prompt's rows join the
    decoding requests' step (one ragged batch, each weight read once for all) instead of a step of their
    own that the others wait on."""
    return [sys.executable, "-m", "runtime.guard", sys.executable, "-m", "gpt2_arch.server", "serve",
            "--custom-architectures", "gpt2_arch", "--model", str(checkpoint_dir), "--served-model-name", MODEL,
            "--devices", "cpu",
            "--max-batch-size", str(max_batch_size), "--kv-cache-page-size", str(PAGE),
            "--no-enable-overlap-scheduler", "--no-device-graph-capture", "--enable-echo",
            "--enable-in-flight-batching",
            "--host", "127.0.0.1", "--port", str(port)]


def environment(step14: Path, pool_positions: int | None = None) -> dict[str, str]:
    """What the server's processes read besides its flags: the step file, no hub, no telemetry, and the pool's
    positions when given (gpt2_arch.pipeline: shared by every request; else MAX's max_batch_size x 1024)."""
    # No metrics: MAX's metrics worker is a third process, ~15 s of each start on 2 cores, that nothing reads.
    env = {**os.environ, SERVED: str(step14), "HF_HUB_OFFLINE": "1", "MAX_SERVE_DISABLE_TELEMETRY": "1",
           "MAX_SERVE_METRIC_RECORDING_METHOD": "NOOP",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    env.pop(POOL, None)
    return env | ({POOL: str(pool_positions)} if pool_positions else {})


class Signalled:
    """Set by a signal handler, read by a loop: no lock, since a handler runs in the main thread between
    two of its bytecodes and would wait forever on a lock that thread already holds (a threading.Event's,
    inside its own wait). `wait` sleeps; the exception a handler raises ends the sleep."""

    def __init__(self):
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float) -> bool:
        if not self._set:
            time.sleep(timeout)
        return self._set


def _exit_on_signals(signalled: Signalled) -> dict:
    """While a server runs, Ctrl-C (SIGINT), SIGTERM and SIGHUP (a `kill`, a closed terminal) end this
    process through KeyboardInterrupt or SystemExit, so that the `with` stops the server; and set
    `signalled`, for a loop that waits on the server: Python drops an exception raised while a finalizer
    (`__del__`, a weakref callback) runs, so the raise alone may not end it. Returns the handlers before."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    def leave(signum, frame):
        signalled.set()
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + signum)

    return {sig: signal.signal(sig, leave) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}


def _restore(handlers: dict) -> None:
    for sig, handler in handlers.items():
        signal.signal(sig, handler)


class ServerError(Exception):
    """The server did not start; the message holds the last lines it printed."""


class ServerTimeout(ServerError):
    """The server was still starting at its time limit (a cold compile on a loaded machine can take that long)."""


class Server:
    def __init__(self, step14: Path, checkpoint_dir: Path, *, port: int | None = None, limit: float = START_LIMIT,
                 log: Path | None = None, quiet: bool = False, max_batch_size: int = 16,
                 pool_positions: int | None = None):
        self.step14, self.checkpoint_dir, self.limit, self.quiet = step14, checkpoint_dir, limit, quiet
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log or REPO / ".cache" / f"serve-{self.port}.log"
        self.max_batch_size, self.pool_positions = max_batch_size, pool_positions
        self.process: subprocess.Popen | None = None
        self.started_in: float | None = None
        self._handlers: dict = {}
        self.signalled = Signalled()  # set by Ctrl-C, SIGTERM or SIGHUP while the server runs
        self._read = 0  # how much of the log refusals() has read

    def __enter__(self) -> Server:
        self._handlers = _exit_on_signals(self.signalled)
        try:
            self.start()
        except BaseException:
            _restore(self._handlers)
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.stop()
        finally:
            _restore(self._handlers)

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        build_once()  # before max serve's processes import MAX side by side
        began = time.perf_counter()
        with open(self.log, "w") as out:
            self.process = subprocess.Popen(command(self.checkpoint_dir, self.port, max_batch_size=self.max_batch_size),
                                            cwd=REPO, env=environment(self.step14, self.pool_positions), stdout=out,
                                            stderr=subprocess.STDOUT, stdin=subprocess.PIPE,
                                            start_new_session=True)
        try:
            self._wait(began)
        except BaseException:
            self.stop()
            raise
        self.started_in = time.perf_counter() - began

    def _wait(self, began: float) -> None:
        """Waits for /v1/models to answer, showing the stage: one line redrawn on a terminal, a line per
        stage when the output is piped or logged."""
        shown, stage, tty = "", "", sys.stderr.isatty()
        while True:
            elapsed = time.perf_counter() - began
            if self.process.poll() is not None:
                raise ServerError(f"max serve stopped (exit code {self.process.returncode}) before it was ready:\n"
                                  + self.tail())
            if elapsed > self.limit:
                raise ServerTimeout(f"max serve was not ready after {self.limit:.0f} s:\n" + self.tail())
            if self.ready():
                if not self.quiet:
                    done = f"(max serve is ready after {elapsed:.0f} s)"
                    print("\r" + done.ljust(len(shown) - 1) if tty else done, file=sys.stderr, flush=True)
                return
            now = self.stage()
            line = f"\r(starting max serve of your model: {now}, {elapsed:.0f} s; " \
                   f"a first start compiles it, 2-4 min on 2 cores)"
            if not self.quiet and tty and line != shown:
                print(line, end="", file=sys.stderr, flush=True)
                shown = line
            elif not self.quiet and not tty and now != stage:
                print(line[1:], file=sys.stderr, flush=True)
            stage = now
            time.sleep(1.0)

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/v1/models", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def stage(self) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        for marker, stage in (("sampler", "compiling the sampler"), ("Compiling ServedGPT2", "model compiled"),
                              ("Building ServedGPT2", "compiling your model"), ("Initializing model", "loading"),):
            if marker in text:
                return stage
        return "starting"

    def refusals(self) -> list[str]:
        """The reasons of the requests the server refused (4xx) since the last call, from its log: MAX's
        own 400 bodies may say only "Value error."; its log says why."""
        if not self.log.exists():
            return []
        with open(self.log, errors="replace") as f:
            f.seek(self._read)
            text = f.read()
        done = text.rfind("\n") + 1  # a line still being written is read next time
        self._read += len(text[:done].encode(errors="replace"))
        return [m.group(1) for m in _REFUSED.finditer(text[:done])]

    def tail(self, lines: int = 15) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        kept = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith(("*", " "))]
        errors = [ln for ln in text.splitlines() if "Error" in ln or "error:" in ln]
        return "\n".join(dict.fromkeys(kept[-lines:] + errors[-3:]))

    def stop(self) -> None:
        """Closes the guard's pipe: the guard sends SIGTERM to the server's group, and SIGKILL after its
        grace; what is still there a few seconds later gets SIGKILL from here. The port is free at once."""
        if self.process is None:
            return
        if self.process.stdin:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=GRACE + 5)
        except subprocess.TimeoutExpired:
            pass
        if _group_alive(self.process.pid):
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _reap(self.process)

    def client(self):
        from openai import OpenAI

        return OpenAI(base_url=self.url + "/v1", api_key="not-needed", max_retries=0, timeout=120)


def _reap(process: subprocess.Popen) -> None:
    """Waits for `process`, sent SIGKILL, to end. Popen's own wait takes a lock that a signal handler raising
    inside Popen.poll (serve's loop polls) can leave held; then waitpid, which needs none, reaps it."""
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        try:
            _, status = os.waitpid(process.pid, 0)
            process.returncode = os.waitstatus_to_exitcode(status)
        except ChildProcessError:  # reaped meanwhile
            pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def descendants(pid: int) -> list[int]:
    """The ids of `pid`'s processes below it, children first ([] where Linux's /proc is not)."""
    found, todo = [], [pid]
    while todo:
        try:
            children = [int(c) for t in Path(f"/proc/{todo.pop(0)}/task").iterdir()
                        for c in (t / "children").read_text().split()]
        except OSError:  # the process ended meanwhile
            continue
        found += children
        todo += children
    return found
