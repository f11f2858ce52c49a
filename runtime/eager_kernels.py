"""The course's eager MAX kernels, compiled together ahead of time, loaded into MAX's op caches.

MAX compiles an eager op's kernel on its first use and keeps it on disk keyed by the module it was
compiled in. The grader's warm-up (`checker/warmup.py`) compiles the kernels the course uses as a few
modules and keeps them here as MAX artifacts (`.mef`), each with the list of kernels it holds. `load()`
puts them in MAX's op caches in a fraction of a second: a process that skipped it would compile each
kernel again on its own, 20-70 s each on 2 cores.

    folder()                       -> where the artifacts live (in MAX's cache folder)
    keep(half, edition, artifacts) -> writes one worker's list: {artifact file: [(op family, kernel)]}
    manifests(edition=None)        -> both workers' lists, if made with this edition (or this MAX)
    load()                         -> how many kernels it put in MAX's op caches (0 if none were made)
"""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

from runtime.paths import save

# MAX is imported inside the functions that use it: importing it takes seconds.

HALVES = (0, 1)  # one artifact list per warm-up worker


def folder() -> Path:
    """In MAX's cache folder, so that emptying it empties them too."""
    try:
        from max._interpreter_ops.gc_compile import _cache_dir

        root = _cache_dir()
    except Exception:
        root = None
    return (Path(root) if root else Path.home() / ".cache" / "modular" / ".max_cache") / "gpt2-course"


def keep(half: int, edition: str, artifacts: dict[str, list[tuple[str, str]]]) -> None:
    save(folder() / f"eager-{half}.json",
         lambda tmp: tmp.write_text(json.dumps({"edition": edition, "artifacts": artifacts})))


def manifests(edition: str | None = None) -> list[dict] | None:
    """Both workers' lists, if both were made with `edition` (by default: with this MAX, whatever the
    warm-up's programs were: the kernels are valid all the same)."""
    try:
        found = [json.loads((folder() / f"eager-{half}.json").read_text()) for half in HALVES]
    except (OSError, ValueError):
        return None
    if edition is None:
        return found if all(str(m.get("edition", "")).split(" ")[0] == version("max") for m in found) else None
    return found if all(m.get("edition") == edition for m in found) else None


def load() -> int:
    """The artifacts' kernels into MAX's op caches; how many. 0 before the warm-up made them, or if MAX's
    internals this leans on moved (MAX then compiles each op on its first use, as without this)."""
    if (found := manifests()) is None:
        return 0
    try:
        from max._interpreter_ops import gc_compile
        from max.driver import CPU

        families = {family.name: family for family in gc_compile.registered_families()}
        session = gc_compile.session_for(CPU())
        loaded = 0
        for manifest in found:
            for artifact, kernels in manifest["artifacts"].items():
                models = session.load_all(folder() / artifact)
                for family, key in kernels:
                    families[family].cache.setdefault(key, models[key])
                loaded += len(kernels)
        return loaded
    except (ImportError, AttributeError, KeyError, OSError, RuntimeError):
        return 0
