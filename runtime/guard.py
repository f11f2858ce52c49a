"""Runs a command and ends it, with everything it started, once whoever started the guard is gone.

    python -m runtime.guard COMMAND...     (stdin: a pipe whose write end only the starter holds)

The guard is started in a process group of its own (`start_new_session`) and runs COMMAND in it. It
reads its stdin: the starter never writes, so the read returns only when the starter's end closes,
which the operating system does however the starter ends: a return, Ctrl-C, a kill, SIGKILL, a closed
terminal. The guard then sends SIGTERM to the whole group, and SIGKILL after GRACE seconds to what is
left, so a server's port is free again within GRACE + a second. Portable (no prctl): Linux and macOS.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

GRACE = 8.0  # seconds between SIGTERM and SIGKILL


def stop(child: subprocess.Popen, grace: float = GRACE) -> None:
    """SIGTERM to the whole group (the guard ignores it), SIGKILL to the group if COMMAND is still there
    after `grace` seconds (the guard goes with it)."""
    os.killpg(os.getpgrp(), signal.SIGTERM)
    try:
        child.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(os.getpgrp(), signal.SIGKILL)


def main(argv: list[str]) -> int:
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # the group's signals are for COMMAND
        signal.signal(sig, signal.SIG_IGN)
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                             preexec_fn=lambda: [signal.signal(s, signal.SIG_DFL) for s in
                                                 (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)])

    def starter_gone():
        try:
            while sys.stdin.buffer.read(1):
                pass
        except OSError:
            pass
        if child.poll() is None:
            stop(child)

    threading.Thread(target=starter_gone, daemon=True).start()
    code = child.wait()
    os.killpg(os.getpgrp(), signal.SIGTERM)  # whatever COMMAND left behind in the group
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
