"""MAX's runtime threads give way to the host's Python in a process that runs a compiled model.

MAX runs a graph's ops on its own threads, one per core ("Thread0", "Thread1", ... in /proc), and between
ops they spin rather than sleep. A step also has host work around its graph (a decode loop's next id and
inputs; under `max serve` the scheduler's Python and the message to the API server's process), which on
a CPU where those threads are all the cores shares a core with a spinning one. yield_to_host() puts them
under Linux's SCHED_IDLE policy: they run on any cycle no other thread asks for, and a thread that wakes
with work takes their core at once. A lower priority alone (a niceness) is not enough: the kernel lets a
running thread finish its time slice before a woken one of higher priority, and the scheduler's Python,
set aside several times a token (MAX's own polling thread wakes thousands of times a second), waited out
a spinning thread's slice each time. The compiled runs' session (runtime.compiling) and the served
model's worker (gpt2_arch.model) call it once their session exists.

Linux only (a policy is per thread there, set through the thread's id); elsewhere it does nothing.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

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


def yield_to_host() -> None:
    """Put this process's MAX runtime threads under SCHED_IDLE (no privilege needed: it lowers them)."""
    for tid in runtime_threads():
        try:
            os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
        except OSError:  # the thread ended meanwhile, or this system refuses
            continue
