"""The one record format every dataset is normalized into, and its JSONL I/O."""

from __future__ import annotations

import json
import os
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
    answer_form: str | None = None  # what the final answer must be, where its dataset entry says (number, choice)

    @property
    def golds(self) -> list[str]:
        return [self.answer, *self.alt_answers]

    def to_json(self) -> dict:
        d = asdict(self)
        d["alt_answers"] = list(self.alt_answers)
        for key in ("system", "answer_form"):
            if d[key] is None:  # most sets have none: their files stay as they were
                del d[key]
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
            answer_form=d.get("answer_form"),
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


class DataError(ValueError):
    """A row that cannot be used, named by file and line."""


SKIP_HINT = "fix or delete the line, or set data.skip_bad_rows: true to skip such rows (the report counts them)"


def read_jsonl(path: str | Path, skip_bad: bool = False, skipped: list[int] | None = None) -> list[dict]:
    """A JSONL file's rows. A line that is not a UTF-8 JSON object is an error
    naming the file and line, or, with `skip_bad`, skipped (its line number
    appended to `skipped`)."""
    return [row for _, row in numbered_rows(path, skip_bad, skipped)]


def numbered_rows(path: str | Path, skip_bad: bool = False, skipped: list[int] | None = None) -> list[tuple[int, dict]]:
    """(line number, row) of each row of a JSONL file (see read_jsonl)."""
    path = Path(path)
    rows = []
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw.decode("utf-8"))
                why = None if isinstance(row, dict) else f"a JSON {type(row).__name__}, not an object"
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                why = f"not valid JSON ({e})"
            if why is None:
                rows.append((lineno, row))
            elif skip_bad:
                (skipped if skipped is not None else []).append(lineno)
            else:
                raise DataError(f"{path}:{lineno}: {why}; {SKIP_HINT}")
    return rows


def read_records(path: str | Path) -> list[Record]:
    """Read prepared records (written by the data stage): a line that is not a
    record, or an id seen before, is an error naming its line. An empty file
    is an error too."""
    path = Path(path)
    records, seen = [], set()
    rerun = "the prepared data is damaged: rerun the data stage (dvc repro -f prepare_data)"
    for lineno, row in numbered_rows(path):
        problem, answer = row.get("problem"), row.get("answer")
        if not _nonempty(problem) or not _nonempty(answer) or "id" not in row or "source" not in row:
            raise DataError(f"{path}:{lineno}: a record needs an id, a source and a non-empty problem and answer; "
                            f"{rerun}")
        if str(row["id"]) in seen:
            raise DataError(f"{path}:{lineno}: id {row['id']} appears twice; {rerun}")
        seen.add(str(row["id"]))
        records.append(Record.from_json(row))
    if not records:
        raise EmptyDatasetError(f"{path}: no usable records. Re-run the data stage (dvc repro prepare_data).")
    return records


def first_problems(records: list[Record], n: int) -> list[Record]:
    """The problems with the first `n` ids of a set, where ids end in the row's
    number in its source (`math500-17`): a slice is then the same problems
    whatever rows were lost before it. Ids without distinct numbers (the
    generated arithmetic sets, numbered per level) count by position."""
    tails = [r.id.rsplit("-", 1)[-1] for r in records]
    if not all(t.isdigit() for t in tails) or len(set(tails)) < len(tails):
        return records[:n]
    return [r for r, t in zip(records, tails) if int(t) < n]


def problem_key(text: str) -> str:
    """A problem as compared for overlap between sets: its words, lower-cased, spacing ignored."""
    return " ".join(text.lower().split())


def _nonempty(x) -> bool:
    return isinstance(x, str) and x.strip() != ""
