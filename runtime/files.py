"""A checkpoint's files: the model's file name, and the sha256 sums written beside them
(`SHA256SUMS`, as `sha256sum` writes it) when a checkpoint is downloaded or generated."""

from __future__ import annotations

import hashlib
from pathlib import Path

MODEL_FILE = "model.safetensors"
SUMS_FILE = "SHA256SUMS"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def read_sums(folder: Path) -> dict[str, str]:
    """`SHA256SUMS` as {file name: hex digest}; empty if there is none."""
    sums = folder / SUMS_FILE
    if not sums.exists():
        return {}
    pairs = (line.split() for line in sums.read_text().splitlines() if line.strip())
    return {name: digest for digest, name in pairs}


def write_sums(folder: Path, names: list[str]) -> dict[str, str]:
    sums = {name: sha256_file(folder / name) for name in names if (folder / name).exists()}
    (folder / SUMS_FILE).write_text("".join(f"{d}  {n}\n" for n, d in sums.items()))
    return sums
