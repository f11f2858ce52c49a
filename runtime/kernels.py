"""A Mojo kernel folder handed to MAX at a path named by its content, so a kernel compiles once.

MAX builds a custom op's Mojo folder (custom_extensions) into a package whose path it derives from the
folder's path, and finds a graph calling that package again in its cache only under that path: the same
kernel in a fresh clone, in a test's folder or as the solution's copy is compiled again, ~15-90 s a graph.
`by_content()` makes MAX build, instead of the folder, a copy of it at

    <cache>/<sha256 of MAX's and Mojo's versions and the folder's files, 16 hex>/<the folder's name>

so a kernel with the same files has the same path wherever it lives; an edited kernel, a new one. The
package MAX built from a copy is used again as it is, not rebuilt on each load. A Mojo compile error is
given back naming the learner's own files, not the copy.

    content_copy(folder)  -> the copy's folder (made once; concurrent processes race harmlessly)
    by_content()          MAX's Mojo package builder wrapped so; runtime.setup() calls it
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import mojo.paths

ROOT = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gpt2-on-max" / "kernels"
# the modules that bind MAX's builder by name when imported (MAX 26.7)
_USERS = ("max.graph.graph", "max.engine.api", "max.experimental.custom")


@cache
def _compiler() -> str:
    """MAX's and Mojo's versions: a package built by one is not used by another."""
    try:
        return f"{version('max')} {version('mojo-compiler')}"
    except PackageNotFoundError:
        return "unknown"


def _digest(folder: Path) -> str:
    """sha256 over MAX's and Mojo's versions and every file under `folder` (its relative path and its bytes), hidden
    ones left out."""
    digest = hashlib.sha256(_compiler().encode() + b"\0")
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        relative = path.relative_to(folder)
        if any(part.startswith(".") or part == "__pycache__" for part in relative.parts):
            continue
        digest.update(str(relative).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def content_copy(folder: Path, root: Path | None = None) -> Path:
    """`folder` copied to root (ROOT unless given)/<its digest>/<its name>, unless already there; that path."""
    folder = Path(folder).resolve()
    target = (root or ROOT) / _digest(folder) / folder.name
    if target.is_dir():
        return target
    staging = target.with_name(f".{target.name}.{os.getpid()}")  # beside it: the same files may have other names
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(folder, staging, ignore=shutil.ignore_patterns(".*", "__pycache__"))
    try:
        staging.replace(target)  # another process may have put the same there first: theirs stands
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _built(copy: Path) -> Path:
    """Where MAX's builder puts the package it builds from `copy` (mojo.paths, MAX 26.7): a package there
    was built from these very files, by this Mojo, so it is not built again (~1.6 s a load)."""
    key = hashlib.md5(str(copy.absolute()).encode()).hexdigest()
    return Path(tempfile.gettempdir()) / f".modular_{os.getuid()}" / "mojo_pkg" / f"mojo_pkg_{key}.mojoc"


def _wrapped(build):
    def build_by_content(path: Path) -> Path:
        try:
            copy = content_copy(path)
        except OSError:  # a read-only cache: MAX builds the folder as it is
            return build(path)
        built = _built(copy)
        if built.is_file():
            return built
        try:
            return build(copy)
        except Exception as e:  # Mojo's compile error: its files named as the learner has them
            own = str(Path(path).resolve())
            for name in ("stdout", "stderr"):
                if isinstance(getattr(e, name, None), str):
                    setattr(e, name, getattr(e, name).replace(str(copy), own))
            if isinstance(getattr(e, "command", None), list):
                e.command = [str(part).replace(str(copy), own) for part in e.command]
            if hasattr(e, "path"):
                e.path = Path(path)
            raise

    build_by_content.original = build
    return build_by_content


def by_content() -> None:
    """MAX's Mojo package builder, in mojo.paths and in the MAX modules already holding it, wrapped once."""
    if hasattr(mojo.paths._build_mojo_source_package, "original"):
        return
    wrapped = _wrapped(mojo.paths._build_mojo_source_package)
    mojo.paths._build_mojo_source_package = wrapped
    for name in _USERS:
        if name in sys.modules and hasattr(sys.modules[name], "_build_mojo_source_package"):
            sys.modules[name]._build_mojo_source_package = wrapped
