"""MAX's Python modules written in Mojo, built by one process before others start beside it.

MAX 26.7 builds `max._kv_cache_ops` (imported by `max.experimental.nn`) from its Mojo source on the
first import after an install, writing the shared library in place: a second process importing it
meanwhile loads a half-written file and fails ("ImportError: ... kv_cache_ops.hash-....so: file too
short"). So before starting processes that import MAX side by side (pytest's workers, the warm-up's,
a server's), the parent imports them here, one process at a time (a lock in the course's cache):
the build takes seconds after an install, the import ~0.4 s after that.
"""

from __future__ import annotations

import fcntl
import importlib

from runtime.paths import CACHE

MODULES = ("max._kv_cache_ops",)
LOCK = CACHE / "mojo_modules.lock"


def build_once(modules: tuple[str, ...] = MODULES) -> None:
    """Imports `modules` (building them if they are not built yet) while holding the course's lock."""
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        for name in modules:
            importlib.import_module(name)
