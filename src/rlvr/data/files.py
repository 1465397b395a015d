"""The rows of a local dataset file, by its suffix: JSONL, JSON (a list of
objects), parquet (verl's format among them) or CSV. Each row comes with its
place in the file (JSONL and CSV: its line; JSON and parquet: its row, from 1),
which every error names."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from rlvr.data.records import SKIP_HINT, DataError, numbered_rows


def read_rows(path: str | Path, skip_bad: bool = False, skipped: list[int] | None = None) -> list[tuple[int, dict]]:
    """(place, row) of every row of `path`. A JSONL line that is not an object is an error naming it, or,
    with `skip_bad`, skipped (its line appended to `skipped`)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} not found")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return numbered_rows(path, skip_bad, skipped)
    if suffix == ".json":
        return _objects(path, _json_list(path), skip_bad, skipped)
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        return list(enumerate(pq.read_table(path).to_pylist(), start=1))
    if suffix == ".csv":
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            return [(reader.line_num, dict(row)) for row in reader]
    raise DataError(f"{path}: a dataset file must be .jsonl, .json, .parquet or .csv")


def _json_list(path: Path) -> list:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataError(f"{path}: not valid JSON ({e}); a .json dataset is one list of row objects "
                        "(one object per line: name the file .jsonl)") from e
    if not isinstance(data, list):
        raise DataError(f"{path}: a .json dataset is one list of row objects, got a JSON {type(data).__name__}")
    return data


def _objects(path: Path, items: list, skip_bad: bool, skipped: list[int] | None) -> list[tuple[int, dict]]:
    rows = []
    for place, item in enumerate(items, start=1):
        if isinstance(item, dict):
            rows.append((place, item))
        elif skip_bad:
            (skipped if skipped is not None else []).append(place)
        else:
            raise DataError(f"{path}:{place}: row {place} is a JSON {type(item).__name__}, not an object; {SKIP_HINT}")
    return rows


def columns(rows: list[tuple[int, dict]]) -> list[str]:
    """The columns the rows have, in first-seen order."""
    return list(dict.fromkeys(k for _, row in rows for k in row))
