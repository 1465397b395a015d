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
from typing import Callable

from rlvr.data.names import BENCHMARKS, OFFLINE_TRAIN_SETS
from rlvr.data.records import EmptyDatasetError, Record, read_jsonl


@dataclass(frozen=True)
class HubSpec:
    """Where a dataset lives on the hub and which columns hold what: a column
    name, a dotted path into nested columns, or a function of the row."""

    repo: str
    split: str
    problem: str | Callable[[dict], str]
    answer: str | Callable[[dict], str]
    config: str | None = None
    dedupe: bool = False  # the hub copy repeats problems (DAPO-Math-17k: ~100x)
    system: Callable[[dict], str | None] | None = None  # the row's own system turn, for chat-turn rows


# DAPO-Math-17k wraps every problem in its own "Answer: $Answer" instruction;
# the recipes use their own prompt, so the problem is taken out of it.
DAPO_PREFIX = ("Solve the following math problem step by step. The last line of your response should be of the "
               "form Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n")
DAPO_SUFFIX = '\n\nRemember to put your answer on its own line after "Answer:".'


def dapo_problem(row: dict) -> str:
    text = row["prompt"][0]["content"]
    return text.removeprefix(DAPO_PREFIX).removesuffix(DAPO_SUFFIX)


def last_user_turn(row: dict) -> str:
    """Openr1-Math-46k stores chat turns (LUFFY's system prompt first): the problem is the user turn."""
    return next(t["content"] for t in reversed(row["prompt"]) if t["role"] == "user")


def system_turn(row: dict) -> str | None:
    """The system turn of a chat-turn row (SIREN trains on it: verl templates each row's own turns)."""
    return next((t["content"] for t in row["prompt"] if t["role"] == "system"), None)


def column(row: dict, key: str | Callable[[dict], str]):
    if callable(key):
        return key(row)
    value = row
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


HUB = {
    "deepscaler": HubSpec("agentica-org/DeepScaleR-Preview-Dataset", "train", "problem", "answer"),
    "dapo_math": HubSpec("BytedTsinghua-SIA/DAPO-Math-17k", "train", dapo_problem, "reward_model.ground_truth",
                         dedupe=True),
    "openr1_math": HubSpec("Elliott/Openr1-Math-46k-8192", "train", last_user_turn, "reward_model.ground_truth",
                           system=system_turn),
    "aime24": HubSpec("HuggingFaceH4/aime_2024", "train", "problem", "answer"),
    "aime25": HubSpec("yentinglin/aime_2025", "train", "problem", "answer"),
    # The 83 AMC 2022-23 problems the DisCO and SIREN papers (and DeepScaleR) evaluate on, as vendored.
    "amc23": HubSpec("AI-MO/aimo-validation-amc", "train", "problem", "answer"),
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
            except (ValueError, SyntaxError):
                parsed = None
            # A list of strings holds alternative forms; numbers ("[-2,4]") are an interval.
            if isinstance(parsed, list) and parsed and all(isinstance(x, str) for x in parsed):
                forms = parsed
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


def normalize(rows: list[dict], source: str, problem_key: str | Callable = "problem",
              answer_key: str | Callable = "answer", where: str | None = None, dedupe: bool = False,
              system: Callable[[dict], str | None] | None = None) -> list[Record]:
    """Rows -> Records. Rows without a problem or answer ("None" is a null that
    became text), or repeating an id (with `dedupe`, a problem), are skipped
    and counted in one warning that names the file and rows."""
    out, seen, skipped = [], set(), []
    for i, row in enumerate(rows):
        raw_answer = column(row, answer_key)
        answer, alts = split_answer("" if raw_answer in (None, "None") else raw_answer)
        rid = str(row.get("id", f"{source}-{i}"))
        problem = str(column(row, problem_key) or "").strip()
        key = problem if dedupe else rid
        if not problem or not answer or key in seen:
            skipped.append(i + 1)
            continue
        seen.add(key)
        out.append(Record(id=rid, problem=problem, answer=answer, source=source, level=_level(row), alt_answers=alts,
                          system=system(row) if system else None))
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


def load_hub(name: str, mirror: str | Path | None = None) -> list[Record]:
    """Load a dataset from the hub through `datasets` (the online path).

    With `mirror` (data.hub_mirror), the same rows come from local files in the
    hub's format, `<mirror>/<repo>/<split>.jsonl`: for clusters without
    internet, and for the tests, which run this very code offline."""
    if name not in HUB:
        raise KeyError(f"no hub source known for '{name}'; known: {', '.join(HUB)}")
    spec = HUB[name]
    if mirror:
        path = Path(mirror) / spec.repo / f"{spec.split}.jsonl"
        if not path.exists():
            raise FileNotFoundError(f"data.hub_mirror: {path} not found (expected {spec.repo}'s {spec.split} "
                                    "split as JSONL rows in the hub's format)")
        import datasets

        ds = datasets.load_dataset("json", data_files=str(path), split="train")
        return _hub_records(name, spec, ds, str(path))
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
    return _hub_records(name, spec, ds, spec.repo)


def _hub_records(name: str, spec: HubSpec, ds, where: str) -> list[Record]:
    rows = [dict(r, id=f"{name}-{i}") for i, r in enumerate(ds)]
    return normalize(rows, name, spec.problem, spec.answer, where=where, dedupe=spec.dedupe, system=spec.system)


def load(name: str, source: str, vendor_dir: str | Path, mirror: str | Path | None = None) -> list[Record]:
    if source == "offline":
        return load_vendored(name, vendor_dir)
    if source == "online":
        return load_hub(name, mirror)
    raise ValueError(f"data.source must be 'offline' or 'online', got '{source}'")
