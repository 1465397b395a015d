"""Atomic writes: a file or directory is built beside its target, then renamed
over it, so a kill at any moment leaves either the old version or the new one.
"""

from __future__ import annotations

import json
import os
import shutil
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_file(path: str | Path, mode: str = "w", **open_kwargs):
    """Open `<path>.tmp` for writing; on success it replaces `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, mode, **open_kwargs) as f:
        yield f
    os.replace(tmp, path)


def write_text(path: str | Path, text: str) -> Path:
    with atomic_file(path, encoding="utf-8") as f:
        f.write(text)
    return Path(path)


def write_json(path: str | Path, obj, indent: int = 2) -> Path:
    return write_text(path, json.dumps(obj, indent=indent) + "\n")


def staging_dir(path: str | Path) -> Path:
    """An empty `<path>.tmp` to build the new version of directory `path` in."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def commit_dir(tmp: Path, path: str | Path) -> None:
    """Put the finished `tmp` in place of `path`. The previous version is first
    renamed to `<path>.old`, so a kill between the two renames leaves a
    complete copy that `recover_dir` puts back."""
    path = Path(path)
    old = path.with_name(path.name + ".old")
    if path.exists():
        shutil.rmtree(old, ignore_errors=True)
        os.replace(path, old)
    os.replace(tmp, path)
    shutil.rmtree(old, ignore_errors=True)


@contextmanager
def atomic_dir(path: str | Path):
    """Yield an empty staging directory; on success it replaces `path`."""
    tmp = staging_dir(path)
    yield tmp
    commit_dir(tmp, path)


def recover_dir(path: str | Path, complete_marker: str) -> None:
    """After a kill between `atomic_dir`'s renames only `<path>.old` is whole:
    move it back when `path` lacks `complete_marker`."""
    path = Path(path)
    old = path.with_name(path.name + ".old")
    if not (path / complete_marker).exists() and (old / complete_marker).exists():
        shutil.rmtree(path, ignore_errors=True)
        os.replace(old, path)


def remove_dir(path: str | Path) -> None:
    """`path` and any leftover `.tmp` / `.old` copies."""
    for suffix in ("", ".tmp", ".old"):
        shutil.rmtree(Path(str(path) + suffix), ignore_errors=True)
