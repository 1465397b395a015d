"""What a dataset entry's file tells before any compute (the check_params
stage): the file is there and readable, the columns it names exist, its rows
have a problem and a gold, and no training set shares problems with an
evaluation set. Hub entries are read by the data stage itself (the hub is its
work); it counts what they share too (data/prepared/eval/sets.json)."""

from __future__ import annotations

import warnings

from rlvr.data import sources
from rlvr.data.files import columns, read_rows
from rlvr.data.records import DataError, EmptyDatasetError, problem_key
from rlvr.settings.datasets import ARITHMETIC, REGISTERED, DataParams, DatasetEntry, entry_of, name_of

SHOWN = 5  # rows named in a message before "..."


def dataset_problems(p: DataParams) -> list[str]:
    """Every problem of every local entry's file, and every training set's overlap with an evaluation set."""
    problems: list[str] = []
    for where, items in (("data.train_sets", p.train_sets), ("data.benchmarks", p.benchmarks)):
        for i, item in enumerate(items):
            if isinstance(item, DatasetEntry) and item.path:
                problems += file_problems(f"{where}[{i}]", item, p)
    if not problems:
        problems += overlap_problems(p)
    return problems


def file_problems(where: str, e: DatasetEntry, p: DataParams) -> list[str]:
    skip = p.skip_bad_rows if e.skip_bad_rows is None else e.skip_bad_rows
    try:
        rows = read_rows(e.path, skip, [])
    except FileNotFoundError:
        return [f"'{where}.path': {e.path} not found: put the file there, or fix the path"]
    except (DataError, OSError, ValueError) as err:  # pyarrow's errors are ValueErrors and OSErrors
        return [f"'{where}.path': {e.path} cannot be read: {err}"]
    if not rows:
        return [f"'{where}.path': {e.path} has no rows"]
    found = columns(rows)
    named = {"problem": e.problem_key, "answer": e.answer_key} | ({"system": e.system_key} if e.system_key else {})
    out = [column_problem(where, key, path, rows, found, e) for key, path in named.items()]
    if e.format == "verl" and "data_source" not in found:
        out.append(f"'{where}': format: verl reads the columns prompt, reward_model.ground_truth and data_source; "
                   f"{e.path} has no data_source (its columns: {', '.join(found)})")
    out = [m for m in out if m]
    if not out and not skip:
        out += empty_problems(where, e, rows)
    return out


def column_problem(where: str, key: str, path: str, rows, found: list[str], e: DatasetEntry) -> str | None:
    """Why `path` reaches no value in any row, naming what the file has there."""
    top = path.split(".")[0]
    if top not in found:
        return (f"'{where}.{key}' names the column '{top}', which {e.path} does not have; its columns: "
                f"{', '.join(found)}")
    if any(sources.cell(row, path, "system" if key == "system" else "user") is not None for _, row in rows):
        return None
    parent = path.rsplit(".", 1)[0]
    inner = sorted({k for _, row in rows if isinstance(v := sources.cell(row, parent), dict) for k in v})
    holds = f" ('{parent}' holds: {', '.join(inner)})" if inner and "." in path else ""
    return f"'{where}.{key}': '{path}' reaches no value in any row of {e.path}{holds}"


def empty_problems(where: str, e: DatasetEntry, rows) -> list[str]:
    """Rows without a problem or a gold (after the entry's gold rule), named with the fix."""
    empty = []
    for place, row in rows:
        gold = sources.gold_of(sources.cell(row, e.answer_key), e.gold_rule)[0]
        if not str(sources.cell(row, e.problem_key) or "").strip() or not gold.strip():
            empty.append(place)
    if not empty:
        return []
    shown = ", ".join(map(str, empty[:SHOWN])) + (" ..." if len(empty) > SHOWN else "")
    return [f"'{where}': the problem or gold ('{e.answer_key}', read {e.gold_rule}) is empty on {len(empty)} of "
            f"{len(rows)} rows of {e.path} (rows {shown}): fix those rows, set 'gold:' to how the file stores its "
            "answers (clean, as_stored, gsm8k, boxed), or 'skip_bad_rows: true' to skip them (the report counts them)"]


def overlap_problems(p: DataParams) -> list[str]:
    """A training set sharing problems with an evaluation set, where either is a local file (what
    registered sets share, aime_1983_2023 with math500, the data stage counts and the report shows)."""
    train = {name_of(i): i for i in p.train_sets if i != ARITHMETIC and _readable(i, p)}
    evals = {name_of(i): i for i in p.benchmarks if _readable(i, p)}
    out, read = [], {}

    def problems(item) -> frozenset[str]:
        if name_of(item) not in read:
            read[name_of(item)] = _problems(item, p)
        return read[name_of(item)]

    for t, t_item in train.items():
        for b, b_item in evals.items():
            if not (_local(t_item) or _local(b_item)):
                continue
            shared = problems(t_item) & problems(b_item)
            if shared:
                example = min(shared)[:80]
                out.append(f"'data.train_sets' {t} and 'data.benchmarks' {b} share {len(shared)} problem(s) "
                           f"(e.g. \"{example}\"): the evaluation would score problems the model trained on; "
                           "remove them from one of the files")
    return out


def _local(item) -> bool:
    return isinstance(item, DatasetEntry) and bool(item.path)


def _readable(item, p: DataParams) -> bool:
    """A set whose rows are on this machine: a local file, or a registered set's vendored copy."""
    return _local(item) or (item in REGISTERED and sources.reads_vendored(entry_of(item), p))


def _problems(item, p: DataParams) -> frozenset[str]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # skipped rows are the data stage's to report
            records = sources.load_set(item, p, [])
    except (DataError, EmptyDatasetError, FileNotFoundError):
        records = []
    return frozenset(problem_key(r.problem) for r in records)
