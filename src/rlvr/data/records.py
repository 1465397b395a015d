"""The one record format every dataset is normalized into, and its JSONL I/O."""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable


@dataclass(frozen=True)
class Record:
    """A math problem with a verifiable answer.

    `answer` is the gold answer as text (LaTeX allowed). Some benchmarks accept
    several forms of one answer (Minerva lists '6630.65' and '6630'); those
    extra forms go in `alt_answers` and any of them counts as correct. A set
    stored as chat turns keeps its own system turn in `system` (Openr1-Math-46k:
    LUFFY's), which a training prompt may use (prompt.train.system).
    """

    id: str
    problem: str
    answer: str
    source: str
    level: int | None = None
    alt_answers: tuple[str, ...] = field(default_factory=tuple)
    system: str | None = None

    @property
    def golds(self) -> list[str]:
        return [self.answer, *self.alt_answers]

    def to_json(self) -> dict:
        d = asdict(self)
        d["alt_answers"] = list(self.alt_answers)
        if self.system is None:  # most sets have none: their files stay as they were
            del d["system"]
        return d

    @classmethod
    def from_json(cls, d: dict) -> "Record":
        return cls(
            id=str(d["id"]),
            problem=d["problem"],
            answer=d["answer"],
            source=d["source"],
            level=d.get("level"),
            alt_answers=tuple(d.get("alt_answers") or ()),
            system=d.get("system"),
        )


class EmptyDatasetError(ValueError):
    pass


def write_jsonl(path: str | Path, rows: Iterable[dict | Record]) -> int:
    """Write rows atomically (temp file + rename): a crash leaves the old file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    n = 0
    with open(tmp, "w", encoding="utf-8") as f:
        for row in rows:
            d = row.to_json() if isinstance(row, Record) else row
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
            n += 1
    os.replace(tmp, path)
    return n


def read_jsonl(path: str | Path) -> list[dict]:
    """Read a JSONL file, skipping (and counting, with a warning naming the file
    and lines) rows that are not valid UTF-8 JSON objects."""
    path = Path(path)
    rows, bad = [], []
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                bad.append(lineno)
                continue
            if not isinstance(row, dict):
                bad.append(lineno)
                continue
            rows.append(row)
    if bad:
        warnings.warn(f"{path}: skipped {len(bad)} malformed line(s): {_lines(bad)}", stacklevel=2)
    return rows


def read_records(path: str | Path) -> list[Record]:
    """Read normalized records; rows without a problem or answer, or with an id
    seen before, are skipped and counted. An empty result is an error."""
    path = Path(path)
    records, seen, bad = [], set(), []
    for i, row in enumerate(read_jsonl(path), start=1):
        problem, answer = row.get("problem"), row.get("answer")
        if not _nonempty(problem) or not _nonempty(answer) or "id" not in row or "source" not in row:
            bad.append(i)
            continue
        if str(row["id"]) in seen:
            bad.append(i)
            continue
        seen.add(str(row["id"]))
        records.append(Record.from_json(row))
    if bad:
        warnings.warn(
            f"{path}: skipped {len(bad)} row(s) with a missing/empty problem or answer "
            f"or a duplicate id (rows {_lines(bad)})",
            stacklevel=2,
        )
    if not records:
        raise EmptyDatasetError(f"{path}: no usable records. Re-run the data stage (dvc repro prepare_data).")
    return records


def _nonempty(x) -> bool:
    return isinstance(x, str) and x.strip() != ""


def _lines(nums: list[int], most: int = 10) -> str:
    shown = ", ".join(map(str, nums[:most]))
    return shown + (f", ... (+{len(nums) - most})" if len(nums) > most else "")
