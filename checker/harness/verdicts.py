"""Verdicts of step checks, cached by the content of the files they depend on.

A check's verdict depends on the step file, the course's step files it imports
(directly or through each other), the Mojo files beside them (steps 15-18's kernels:
a step's Python reaches its kernel by a path, not an import; a package named for another
step's file, `step_18_kernel/` beside step 16, is that step's), the checker's own
code and the checkpoint.
Each verdict is stored with the sha256 of each of those; it is valid while
they all still have it. So `pixi run progress` and the "earlier steps" part of
steps 09-14 re-run a step only after something it depends on changed. A check
that a time limit cut short (`--timeout`) is not kept: its verdict says how fast
the code ran under that limit, not whether it is right.

    .cache/verdicts.json   {"07 <checkpoint sha256> /abs/path/steps/step_07.py": {"files": {path: sha256},
                            "checker": sha256, "ok": bool, "parts": [[name, status], ...]}}

A file has a verdict per checkpoint: checking it on another checkpoint (GPT2_WEIGHTS) keeps the first's.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path

from checker.harness import layout
from runtime.paths import CACHE, REPO, save

STORE = CACHE / "verdicts.json"


def _sha(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


@cache
def checker_sha() -> str:
    """The checks' own code: a new version of the course invalidates every verdict."""
    digest = hashlib.sha256()
    for path in sorted((REPO / "checker").rglob("*.py")):
        digest.update(str(path.relative_to(REPO)).encode() + path.read_bytes())
    return digest.hexdigest()


def _load() -> dict:
    try:
        return json.loads(STORE.read_text())
    except (OSError, ValueError):
        return {}


def _key(step: str, path: Path, checkpoint) -> str:
    return f"{step} {checkpoint.sha256} {Path(path).resolve()}"


def _path(key: str) -> Path:
    return Path(key.split(" ", 2)[2])


def lookup(step: str, path: Path, checkpoint) -> dict | None:
    """The stored verdict of `step` for the file at `path`, if nothing it depends on changed since."""
    entry = _load().get(_key(step, path, checkpoint))
    if not entry or entry["checker"] != checker_sha():
        return None
    if any(_sha(Path(f)) != sha for f, sha in entry["files"].items()):
        return None
    return entry


def _kernels(paths: list[Path]) -> list[Path]:
    """The Mojo files in the folders of `paths` and in their subfolders (a kernel package beside a step),
    less the packages named for a step file that is not among `paths` (steps/step_18_kernel/ for step 16's
    verdict): editing a later step's kernel leaves the earlier steps' verdicts standing."""
    paths = [Path(p).resolve() for p in paths]
    folders = {p.parent for p in paths}
    stems = {p.stem for p in paths}
    siblings = {f.stem for folder in folders for f in folder.glob("*.py")}

    def another_steps(package: str) -> bool:  # "step_18_kernel" beside a step_18.py not among `paths`
        stem = package.removesuffix("_kernel")
        return stem != package and stem in siblings and stem not in stems

    return sorted({m for folder in folders for m in [*folder.glob("*.mojo"), *folder.glob("*/*.mojo")]
                   if not another_steps(m.parent.name if m.parent != folder else "")})


def store(step: str, path: Path, checkpoint, report) -> dict:
    """Records `report`'s verdict with the sha256 of every file it read (report.files) and of the Mojo files
    beside them; returns the entry (with "cut_short": True, and not recorded, when a time limit stopped
    the check)."""
    read = [Path(path), *map(Path, report.files)]
    files = {str(f.resolve()): _sha(f) for f in [*read, *_kernels(read)]}
    entry = {
        "files": files, "checker": checker_sha(), "ok": report.ok,
        "parts": [[p.name, p.status] for p in report.parts],
    }
    if report.cut_short:
        return {**entry, "cut_short": True}
    entries = {key: entry for key, entry in _load().items() if len(key.split(" ")) > 2 and _path(key).exists()}
    entries[_key(step, path, checkpoint)] = entry
    save(STORE, lambda tmp: tmp.write_text(json.dumps(entries, indent=1)))  # read-only: recomputed each time
    return entry


def verdict(step: str, path: Path, checkpoint, *, timeout: float) -> dict:
    """The cached verdict, or the check run now (and stored): the file checked as step `step`, through
    the adapter for its layout where it has one (checker.harness.layout)."""
    found = lookup(step, path, checkpoint)
    if found is None:

        found = store(step, path, checkpoint, layout.check(step, path, checkpoint, timeout=timeout))
    return found
