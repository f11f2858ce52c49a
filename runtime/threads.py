"""MAX's runtime threads give way to the host's Python in a process that runs a compiled model.

MAX runs a graph's ops on its own threads, one per core ("Thread0", "Thread1", ... in /proc), and between
ops they spin rather than sleep. A step also has host work around its graph (a decode loop's next id and
inputs; under `max serve` the scheduler's Python and the message to the API server's process), which on
a CPU where those threads are all the cores shares a core with a spinning one. yield_to_host() lowers
their priority (a niceness of NICENESS), so the host's threads get most of a core they share with one,
and the runtime's keep every cycle no one else asks for. The compiled runs' session (runtime.compiling)
and the served model's worker (gpt2_arch.model) call it once their session exists.

Not Linux's SCHED_IDLE, which would hand a woken thread the core at once: under it the runtime's threads
get next to nothing while other programs keep the cores busy (step 14's server beside a busy process per
core served sixteen streams at 7.6 tokens/s under SCHED_IDLE, 51.5 at niceness 10 and 59.6 at 0, and alike
alone: `python -m bench.threads`, the performance page).

Linux only (a niceness is per thread there, set through the thread's id); elsewhere it does nothing.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

NICENESS = 10  # a nice-0 thread then gets about nine tenths of a core it shares with a runtime thread
_RUNTIME_THREAD = re.compile(r"\bThread\d+$")  # MAX 26.7's name for its runtime's threads


def runtime_threads(pid: int | str = "self") -> list[int]:
    """The ids of MAX's runtime threads in process `pid` ([] where /proc is not)."""
    tids = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            name = (task / "comm").read_text().strip()
        except OSError:  # the thread ended meanwhile
            continue
        if _RUNTIME_THREAD.search(name):
            tids.append(int(task.name))
    return tids


def lowered(pids: list[int]) -> dict[int, list[int]]:
    """Of the processes `pids`, those whose MAX runtime threads are all at NICENESS: {pid: those threads' ids}."""
    found = {}
    for pid in pids:
        tids = runtime_threads(pid)
        try:
            if tids and all(os.getpriority(os.PRIO_PROCESS, tid) == NICENESS for tid in tids):
                found[pid] = tids
        except OSError:  # a thread ended meanwhile
            continue
    return found


def yield_to_host() -> None:
    """Lower the priority of this process's MAX runtime threads to NICENESS (one already lower stays so)."""
    for tid in runtime_threads():
        try:
            os.setpriority(os.PRIO_PROCESS, tid, max(NICENESS, os.getpriority(os.PRIO_PROCESS, tid)))
        except OSError:  # the thread ended meanwhile, or this system refuses
            continue
