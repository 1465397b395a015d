"""Every dataset, registered or a params entry, read one way: its rows from
a local file, the vendored copy (data.source: offline), the hub through
`datasets` (online) or a local mirror of it (data.hub_mirror), then each row's
problem and gold taken from the entry's columns into a `Record`.

The vendored files live in data/vendor/ (copied from the published benchmark
releases); the registered sets are entries in rlvr.settings.datasets.
"""

from __future__ import annotations

import ast
import functools
import os
import re
import warnings
from pathlib import Path

from rlvr.data.boxes import last_boxed
from rlvr.data.files import read_rows
from rlvr.data.records import SKIP_HINT, DataError, EmptyDatasetError, Record, numbered_rows
from rlvr.settings.datasets import BENCHMARKS, OFFLINE_TRAIN_SETS, REGISTERED, DataParams, DatasetEntry, entry_of, vendored


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


def cell(row: dict, key: str, role: str = "user"):
    """The value at `key` (a column, or a dotted path into nested columns); a column of chat
    turns ([{role, content}]) gives its last turn of `role`."""
    value = row
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, (list, tuple)) and value and all(isinstance(t, dict) and "role" in t for t in value):
        turns = [t.get("content") for t in value if t.get("role") == role]
        return turns[-1] if turns else None
    return value


def gsm8k_gold(raw) -> str:
    """GSM8K's stored solution ends in "#### 72": the number after the last "####", thousands commas removed."""
    text = "" if raw is None else str(raw)
    return text.rsplit("####", 1)[1].strip().replace(",", "") if "####" in text else ""


def gold_of(raw, rule: str) -> tuple[str, tuple[str, ...]]:
    """(the gold, its alternative forms) from a row's stored answer, by the entry's `gold` rule."""
    if rule == "as_stored":
        return stored_answer(raw)
    if rule == "gsm8k":
        return split_answer(gsm8k_gold(raw))
    if rule == "boxed":
        return split_answer(last_boxed("" if raw is None else str(raw)) or "")
    return split_answer(raw)


def normalize(rows: list[dict], entry: DatasetEntry, where: str | None = None, lines: list[int] | None = None,
              skip_bad: bool = True, skipped: list[int] | None = None, own_ids: bool = False) -> list[Record]:
    """Rows -> Records by `entry`'s columns and rules. A row without a problem or gold ("None"
    is a null that became text), or repeating an id (with `dedupe`, a problem), is skipped (its
    place appended to `skipped`, one warning naming them), or, without `skip_bad`, an error
    naming it. `lines`: each row's place in its file (default 1, 2, ...). A row's id is
    `<name>-<place - 1>`, or with `own_ids` its own `id` where it has one (the vendored files)."""
    out, seen, bad = [], set(), []
    lines = lines or list(range(1, len(rows) + 1))
    name, where = entry.name, where or entry.name
    for line, row in zip(lines, rows):
        raw_answer = cell(row, entry.answer_key)
        raw_answer = "" if raw_answer in (None, "None") else raw_answer
        answer, alts = gold_of(raw_answer, entry.gold_rule)
        rid = str(row.get("id", f"{name}-{line - 1}")) if own_ids else f"{name}-{line - 1}"
        problem = str(cell(row, entry.problem_key) or "").strip()
        problem = problem.removeprefix(entry.strip_prefix).removesuffix(entry.strip_suffix)
        key = problem if entry.dedupe else rid
        if not problem or not answer.strip() or key in seen:
            if not skip_bad and not (entry.dedupe and key in seen):  # a repeat is what dedupe drops
                why = "repeats an earlier row's id or problem" if problem and answer else "has no problem or answer"
                raise DataError(f"{where}:{line}: the row {why}; {SKIP_HINT}")
            bad.append(line)
            continue
        seen.add(key)
        system = cell(row, entry.system_key, "system") if entry.system_key else None
        out.append(Record(id=rid, problem=problem, answer=answer, source=name, level=_level(row), alt_answers=alts,
                          system=None if system is None else str(system), answer_form=entry.answer_form))
        if entry.limit is not None and len(out) == entry.limit:
            break
    if bad:
        (skipped if skipped is not None else []).extend(bad)
        shown = ", ".join(map(str, bad[:10])) + (" ..." if len(bad) > 10 else "")
        warnings.warn(f"{where}: skipped {len(bad)} row(s) with an empty problem or answer "
                      f"or a repeated id (rows {shown})", stacklevel=2)
    if not out:
        raise EmptyDatasetError(f"{where}: no usable rows (each needs a non-empty problem and answer)")
    return out


def reads_vendored(e: DatasetEntry, p: DataParams) -> bool:
    """Whether a set is read from its vendored copy: offline, or a set only vendored (math_train,
    aime_1983_2023), whatever data.source says."""
    return vendored(e.name) is not None and (p.source == "offline" or not e.hub)


def load_set(item: str | DatasetEntry, p: DataParams, skipped: list[int] | None = None) -> list[Record]:
    """One set's Records, the one path for every set but arithmetic: a local file; a registered
    set's vendored copy (data.source: offline); the hub, or its mirror (data.hub_mirror)."""
    e = entry_of(item)
    skip = p.skip_bad_rows if e.skip_bad_rows is None else e.skip_bad_rows
    if e.path:
        skipped = skipped if skipped is not None else []
        numbered = read_rows(e.path, skip, skipped)
        return normalize([row for _, row in numbered], e, e.path, [n for n, _ in numbered], skip, skipped)
    if reads_vendored(e, p):
        return load_vendored(e.name, p.vendor_dir, skip, skipped)
    if p.source == "offline" and not p.hub_mirror:
        raise OfflineError(f"'{e.name}' comes from the hub ({e.hub}): set data.source: online, or data.hub_mirror "
                           "to local copies")
    return load_hub(e, p.hub_mirror, skipped)


def load_vendored(name: str, vendor_dir: str | Path, skip_bad: bool = False,
                  skipped: list[int] | None = None) -> list[Record]:
    """A set vendored in data/vendor: a line that cannot be read is an error
    naming it unless `skip_bad`; so is a benchmark row without a problem or
    answer (a training set's, as math_train's four, are the upstream file's
    own and skipped, counted, as the hub's are)."""
    if not vendored(name):
        raise FileNotFoundError(f"no vendored dataset '{name}'; vendored sets are: "
                                f"{', '.join(BENCHMARKS + OFFLINE_TRAIN_SETS)}")
    path = Path(vendor_dir) / vendored(name)
    if not path.exists():
        raise FileNotFoundError(f"no vendored dataset '{name}' at {path}: data.vendor_dir should hold "
                                "the repository's data/vendor")
    skipped = skipped if skipped is not None else []
    numbered = numbered_rows(path, skip_bad, skipped)
    # the vendored copy is already in the one record format, whatever columns the hub copy uses
    entry = DatasetEntry(name)
    return normalize([row for _, row in numbered], entry, str(path), [n for n, _ in numbered],
                     skip_bad or name not in BENCHMARKS, skipped, own_ids=True)


def load_hub(item: str | DatasetEntry, mirror: str | Path | None = None,
             skipped: list[int] | None = None) -> list[Record]:
    """A hub dataset through `datasets` (the online path), its rows without a problem or
    gold the dataset's own and skipped (counted).

    With `mirror` (data.hub_mirror), the same rows come from local files in the
    hub's format, `<mirror>/<repo>[/<config>]/<split>.jsonl`: for clusters without
    internet, and for the tests, which run this very code offline."""
    if isinstance(item, str) and (item not in REGISTERED or not REGISTERED[item].hub):
        raise KeyError(f"no hub source known for '{item}'; known: "
                       f"{', '.join(n for n, e in REGISTERED.items() if e.hub)}")
    e = entry_of(item)
    if mirror:
        path = Path(mirror) / e.hub / (e.config or "") / f"{e.split}.jsonl"
        if not path.exists():
            raise FileNotFoundError(f"data.hub_mirror: {path} not found (expected {e.hub}'s {e.split} "
                                    "split as JSONL rows in the hub's format)")
        rows = [row for _, row in numbered_rows(path)]
        return normalize(rows, e, str(path), skipped=skipped)
    alternative = (
        "set data.source: offline to use the vendored copy in data/vendor/" if vendored(e.name)
        else "set data.source: offline and data.train_sets: [math_train, aime_1983_2023] "
        "(the vendored offline training sets)" if e.name in REGISTERED
        else "set data.hub_mirror to a local copy, or give the entry a 'path' under data/own/"
    )
    if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1":
        raise OfflineError(f"cannot load '{e.hub}': the hub is switched off (HF_HUB_OFFLINE=1); {alternative}")
    import datasets

    try:
        ds = datasets.load_dataset(e.hub, e.config, split=e.split, revision=hub_commit(e.hub, e.revision))
    except Exception as err:  # network, auth, missing repo: all end the same way
        raise OfflineError(f"cannot load '{e.hub}' from the hub ({type(err).__name__}: {err}); {alternative}") from err
    return normalize(list(ds), e, e.where, skipped=skipped)


@functools.cache
def hub_commit(repo: str, revision: str | None) -> str | None:
    """The commit a hub dataset's `revision` (None: its newest) resolves to, read once per process, so
    the rows loaded and the commit the report names are one; where the hub cannot say, `revision` as
    given (the load that follows then fails with its own cause)."""
    from huggingface_hub import HfApi

    try:
        return HfApi().dataset_info(repo, revision=revision).sha
    except Exception:  # network, auth: the load reports it
        return revision
