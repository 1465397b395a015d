"""Content digests of files and directories: what a run is keyed by (the
training set in a checkpoint's identity) and what MLflow records of a
dataset or a model (without copying it)."""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_md5(path: str | Path) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def tree_md5(path: str | Path) -> str:
    """One md5 over a file or a directory's files (relative names and contents)."""
    path = Path(path)
    if path.is_file():
        return file_md5(path)
    h = hashlib.md5()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(f"{f.relative_to(path)}:{file_md5(f)}\n".encode())
    return h.hexdigest()
