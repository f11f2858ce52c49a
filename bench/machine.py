"""The machine a bench ran on, for its report and its JSON: the CPU, its vector extensions, the threads
and the versions of the packages measured; and busy neighbours to put beside a bench."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path

# torch is imported inside the function that uses it: importing it takes seconds.

VECTOR_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_int8", "amx_bf16", "asimd",
                "sve")


def cpu() -> tuple[str, list[str]]:
    """The CPU's model name and the vector extensions it has (of VECTOR_FLAGS), from /proc/cpuinfo."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine(), []
    name = re.search(r"^model name\s*:\s*(.+)$", info, re.M)
    flags = re.search(r"^(?:flags|Features)\s*:\s*(.+)$", info, re.M)
    have = set(flags.group(1).split()) if flags else set()
    return (name.group(1).strip() if name else platform.machine()), [f for f in VECTOR_FLAGS if f in have]


def machine() -> dict:
    """The CPU, its vector extensions, torch's threads and the versions of Python and of the packages measured."""
    import torch

    model, vectors = cpu()
    return dict(cpus=os.cpu_count(), processor=model, vector_extensions=vectors,
                torch_threads=torch.get_num_threads(), python=platform.python_version(),
                **{name: version(name) for name in ("max", "torch", "transformers")})


@contextmanager
def neighbours(count: int, own_session: bool = False):
    """`count` busy Python loops for the block, each in a session of its own if `own_session` (as another program
    would be), stopped however the block ends, and ending by themselves if this process is killed (each spins
    while its parent is this one)."""
    spin = "import os\nparent = os.getppid()\nwhile os.getppid() == parent: pass"
    loops = [subprocess.Popen([sys.executable, "-c", spin], start_new_session=own_session) for _ in range(count)]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
