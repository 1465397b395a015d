"""Benchmarks and training sets: vendored JSONL offline, `datasets` online.

Both paths end in the same normalized `Record`s. The vendored files live in
data/vendor/ (copied from the published benchmark releases); the online path
pulls the same sets, and DeepScaleR-Preview, from the Hugging Face hub.
"""

from __future__ import annotations

import ast
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rlvr.data.records import SKIP_HINT, DataError, EmptyDatasetError, Record, numbered_rows
from rlvr.settings.datasets import BENCHMARKS, OFFLINE_TRAIN_SETS


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
    # the gold exactly as stored, not cleaned by split_answer: SIREN's reward parses the parquet's ground_truth
    # as it is (recipe/entropy/reward_score.py line 8; no loader step touches it)
    gold_as_stored: bool = False


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
                           system=system_turn, gold_as_stored=True),
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


def stored_answer(raw) -> tuple[str, tuple[str, ...]]:
    """A gold answer exactly as stored (its text; no alternative forms)."""
    return ("", ()) if raw is None else (str(raw), ())


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
              system: Callable[[dict], str | None] | None = None, lines: list[int] | None = None,
              skip_bad: bool = True, skipped: list[int] | None = None, gold_as_stored: bool = False) -> list[Record]:
    """Rows -> Records. A row without a problem or answer ("None" is a null that
    became text), or repeating an id (with `dedupe`, a problem), is skipped
    (its row number appended to `skipped`, one warning naming them), or, without
    `skip_bad`, an error naming it. `lines`: each row's line in its file (default
    1, 2, ...); a row without an id gets `<source>-<line - 1>`. `gold_as_stored`:
    the answer as its row stores it (stored_answer), else split_answer's forms."""
    out, seen, bad = [], set(), []
    lines = lines or list(range(1, len(rows) + 1))
    for line, row in zip(lines, rows):
        raw_answer = column(row, answer_key)
        raw_answer = "" if raw_answer in (None, "None") else raw_answer
        answer, alts = stored_answer(raw_answer) if gold_as_stored else split_answer(raw_answer)
        rid = str(row.get("id", f"{source}-{line - 1}"))
        problem = str(column(row, problem_key) or "").strip()
        key = problem if dedupe else rid
        if not problem or not answer.strip() or key in seen:
            if not skip_bad:
                why = "repeats an earlier row's id or problem" if problem and answer else "has no problem or answer"
                raise DataError(f"{where or source}:{line}: the row {why}; {SKIP_HINT}")
            bad.append(line)
            continue
        seen.add(key)
        out.append(Record(id=rid, problem=problem, answer=answer, source=source, level=_level(row), alt_answers=alts,
                          system=system(row) if system else None))
    if bad:
        (skipped if skipped is not None else []).extend(bad)
        shown = ", ".join(map(str, bad[:10])) + (" ..." if len(bad) > 10 else "")
        warnings.warn(f"{where or source}: skipped {len(bad)} row(s) with an empty problem or answer "
                      f"or a repeated id (rows {shown})", stacklevel=2)
    if not out:
        raise EmptyDatasetError(f"{where or source}: no usable rows (each needs a non-empty problem and answer)")
    return out


def load_vendored(name: str, vendor_dir: str | Path, skip_bad: bool = False,
                  skipped: list[int] | None = None) -> list[Record]:
    """A set vendored in data/vendor: a line that cannot be read is an error
    naming it unless `skip_bad`; so is a benchmark row without a problem or
    answer (a training set's, as math_train's four, are the upstream file's
    own and skipped, counted, as the hub's are)."""
    sub = "benchmarks" if name in BENCHMARKS else "train"
    path = Path(vendor_dir) / sub / f"{name}.jsonl"
    if not path.exists():
        known = ", ".join(BENCHMARKS + OFFLINE_TRAIN_SETS)
        raise FileNotFoundError(f"no vendored dataset '{name}' at {path}; vendored sets are: {known}")
    skipped = skipped if skipped is not None else []
    numbered = numbered_rows(path, skip_bad, skipped)
    return normalize([row for _, row in numbered], name, where=str(path), lines=[n for n, _ in numbered],
                     skip_bad=skip_bad or name not in BENCHMARKS, skipped=skipped)


def load_hub(name: str, mirror: str | Path | None = None, skipped: list[int] | None = None) -> list[Record]:
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
        return _hub_records(name, spec, ds, str(path), skipped)
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
    return _hub_records(name, spec, ds, spec.repo, skipped)


def _hub_records(name: str, spec: HubSpec, ds, where: str, skipped: list[int] | None) -> list[Record]:
    rows = [dict(r, id=f"{name}-{i}") for i, r in enumerate(ds)]
    return normalize(rows, name, spec.problem, spec.answer, where=where, dedupe=spec.dedupe, system=spec.system,
                     skipped=skipped, gold_as_stored=spec.gold_as_stored)


def load(name: str, source: str, vendor_dir: str | Path, mirror: str | Path | None = None, skip_bad: bool = False,
         skipped: list[int] | None = None) -> list[Record]:
    """A benchmark from its vendored copy (offline) or the hub (online, whose
    rows without an answer are the dataset's own and always skipped)."""
    if source == "offline":
        return load_vendored(name, vendor_dir, skip_bad, skipped)
    if source == "online":
        return load_hub(name, mirror, skipped)
    raise ValueError(f"data.source must be 'offline' or 'online', got '{source}'")
