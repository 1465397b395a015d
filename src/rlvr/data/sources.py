"""Benchmarks and training sets: vendored JSONL offline, `datasets` online.

Both paths end in the same normalized `Record`s. The vendored files live in
data/vendor/ (copied from the published benchmark releases); the online path
pulls the same sets, and DeepScaleR-Preview, from the Hugging Face hub.
"""

from __future__ import annotations

import ast
import re
import warnings
import os
from dataclasses import dataclass
from pathlib import Path

from rlvr.data.records import EmptyDatasetError, Record, read_jsonl

BENCHMARKS = ("aime24", "aime25", "amc23", "math500", "minerva", "olympiad_bench")
OFFLINE_TRAIN_SETS = ("math_train", "aime_1983_2023")


@dataclass(frozen=True)
class HubSpec:
    """Where a dataset lives on the hub and which columns hold what."""

    repo: str
    split: str
    problem: str
    answer: str
    config: str | None = None


HUB = {
    "deepscaler": HubSpec("agentica-org/DeepScaleR-Preview-Dataset", "train", "problem", "answer"),
    "aime24": HubSpec("HuggingFaceH4/aime_2024", "train", "problem", "answer"),
    "aime25": HubSpec("yentinglin/aime_2025", "train", "problem", "answer"),
    "amc23": HubSpec("math-ai/amc23", "test", "question", "answer"),
    "math500": HubSpec("HuggingFaceH4/MATH-500", "test", "problem", "answer"),
    "minerva": HubSpec("math-ai/minervamath", "test", "question", "answer"),
    "olympiad_bench": HubSpec("math-ai/olympiadbench", "test", "question", "final_answer"),
}


class OfflineError(RuntimeError):
    pass


def split_answer(raw) -> tuple[str, tuple[str, ...]]:
    """Normalize a gold answer: Minerva and OlympiadBench store a Python list
    literal ("['9.6\\n']"); AMC stores floats ('142.0'). Returns the primary
    answer and any alternative forms."""
    if isinstance(raw, (list, tuple)):
        forms = [str(x) for x in raw]
    else:
        text = str(raw).strip()
        forms = [text]
        if text.startswith("[") and text.endswith("]"):
            try:
                parsed = ast.literal_eval(text)
                if isinstance(parsed, list) and parsed:
                    forms = [str(x) for x in parsed]
            except (ValueError, SyntaxError):
                pass
    forms = [_clean(f) for f in forms if _clean(f)]
    if not forms:
        return "", ()
    return forms[0], tuple(forms[1:])


def _clean(answer: str) -> str:
    a = re.sub(r"(?<!\\)\$", "", answer).strip()  # inline-math delimiters, not escaped \$
    if a.endswith(".0") and a[:-2].lstrip("-").isdigit():
        a = a[:-2]
    return a


def _level(row: dict) -> int | None:
    for key in ("level", "difficulty"):
        v = row.get(key)
        if v is None:
            continue
        try:
            return int(float(str(v).replace("Level", "").strip()))
        except ValueError:
            return None
    return None


def normalize(rows: list[dict], source: str, problem_key: str = "problem", answer_key: str = "answer",
              where: str | None = None) -> list[Record]:
    """Rows -> Records. Rows without a problem or answer, or repeating an id,
    are skipped and counted in one warning that names the file and rows."""
    out, seen, skipped = [], set(), []
    for i, row in enumerate(rows):
        answer, alts = split_answer(row.get(answer_key) or "")
        rid = str(row.get("id", f"{source}-{i}"))
        problem = str(row.get(problem_key) or "").strip()
        if not problem or not answer or rid in seen:
            skipped.append(i + 1)
            continue
        seen.add(rid)
        out.append(Record(id=rid, problem=problem, answer=answer, source=source, level=_level(row), alt_answers=alts))
    if skipped:
        shown = ", ".join(map(str, skipped[:10])) + (" ..." if len(skipped) > 10 else "")
        warnings.warn(f"{where or source}: skipped {len(skipped)} row(s) with an empty problem or answer "
                      f"or a duplicate id (rows {shown})", stacklevel=2)
    if not out:
        raise EmptyDatasetError(f"{where or source}: no usable rows (each needs a non-empty problem and answer)")
    return out


def load_vendored(name: str, vendor_dir: str | Path) -> list[Record]:
    sub = "benchmarks" if name in BENCHMARKS else "train"
    path = Path(vendor_dir) / sub / f"{name}.jsonl"
    if not path.exists():
        known = ", ".join(BENCHMARKS + OFFLINE_TRAIN_SETS)
        raise FileNotFoundError(f"no vendored dataset '{name}' at {path}; vendored sets are: {known}")
    return normalize(read_jsonl(path), name, where=str(path))


def load_hub(name: str) -> list[Record]:
    """Load a dataset from the hub through `datasets` (the online path)."""
    if name not in HUB:
        raise KeyError(f"no hub source known for '{name}'; known: {', '.join(HUB)}")
    spec = HUB[name]
    alternative = (
        "set data.source: offline to use the vendored copy in data/vendor/"
        if name != "deepscaler"
        else "set data.source: offline and data.train_sets: [math_train, aime_1983_2023] "
        "(the vendored offline training sets)"
    )
    if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1":
        raise OfflineError(f"cannot load '{spec.repo}': the hub is switched off (HF_HUB_OFFLINE=1); {alternative}")
    import datasets

    try:
        ds = datasets.load_dataset(spec.repo, spec.config, split=spec.split)
    except Exception as e:  # network, auth, missing repo: all end the same way
        raise OfflineError(f"cannot load '{spec.repo}' from the hub ({type(e).__name__}: {e}); {alternative}") from e
    rows = [dict(r, id=f"{name}-{i}") for i, r in enumerate(ds)]
    return normalize(rows, name, spec.problem, spec.answer)


def load(name: str, source: str, vendor_dir: str | Path) -> list[Record]:
    if source == "offline":
        return load_vendored(name, vendor_dir)
    if source == "online":
        return load_hub(name)
    raise ValueError(f"data.source must be 'offline' or 'online', got '{source}'")
