"""The problems an evaluation scores (each set, its first problems or the
held-out ones) and what it writes of them: per-set metrics, one row per
problem and the sampled completions."""

from __future__ import annotations

import json
from collections import defaultdict

from rlvr.data.records import Record, first_problems, read_records
from rlvr.evaluation.metrics import summarize
from rlvr.grading.grades import GroupGrade
from rlvr.settings.sections import Params


def eval_sets(params: Params) -> dict[str, list[Record]]:
    """The held-out arithmetic split and each configured benchmark, sliced by
    eval.limits (the problems with the first N ids, so every run sees the same slice)."""
    root = params.data.eval_dir
    sets = {}
    for name in ("arithmetic", *params.data.benchmark_names):
        path = root / f"{name}.jsonl"
        if not path.exists():
            raise FileNotFoundError(f"{path} not found: run the data stage first (dvc repro prepare_data)")
        limit = params.eval.limits.get(name)
        sets[name] = first_problems(read_records(path), limit) if limit else read_records(path)
    return sets


def skipped_rows(params: Params, names) -> dict[str, int]:
    """How many source rows each of these sets lost in the data stage (data.skip_bad_rows)."""
    path = params.data.skipped_rows_file
    lost = json.loads(path.read_text()) if path.exists() else {}
    return {name: len(lost[name]) for name in names if lost.get(name)}


def data_sets(params: Params) -> dict[str, dict]:
    """What the data stage read: each set's role, source, rows and shared problems (data/prepared/eval/sets.json)."""
    path = params.data.sets_file
    return json.loads(path.read_text()) if path.exists() else {}


def set_metrics(records: list[Record], grades: list[GroupGrade]) -> dict:
    """Metrics of one set, plus the same per difficulty level where levels exist."""
    correct = [[it.correct for it in g.items] for g in grades]
    majority = [g.majority_correct for g in grades]
    out = summarize(correct, majority)
    by_level = defaultdict(list)
    for i, r in enumerate(records):
        if r.level is not None:
            by_level[r.level].append(i)
    if by_level:
        out["levels"] = {
            str(lv): summarize([correct[i] for i in idx], [majority[i] for i in idx])
            for lv, idx in sorted(by_level.items())
        }
    return out


def distinct_answers(grade: GroupGrade) -> int:
    """Distinct final answers among a problem's k samples (as extracted; none: not counted)."""
    return len({it.extracted.strip() for it in grade.items if it.extracted.strip()})


def mean_perplexity(completions) -> float | None:
    values = [c.perplexity for c in completions if c.perplexity is not None]
    return sum(values) / len(values) if values else None


def problem_rows(problems, grades, completions) -> list[dict]:
    """One row per problem: its k samples' correct count and its maj@k, what
    the report's intervals resample; and their diversity: distinct answers and
    the mean perplexity of the samples under the model (SIREN's analysis)."""
    return [{"benchmark": name, "id": r.id, "level": r.level, "k": len(g.items),
             "correct": sum(it.correct for it in g.items), "majority": g.majority_correct,
             "distinct": distinct_answers(g), "perplexity": mean_perplexity(cs)}
            for (name, r), g, cs in zip(problems, grades, completions)]


def sample_rows(problems, completions, grades) -> list[dict]:
    rows = []
    for (name, r), comps, g in zip(problems, completions, grades):
        for j, (c, it) in enumerate(zip(comps, g.items)):
            rows.append({"benchmark": name, "id": r.id, "level": r.level, "sample": j, "problem": r.problem,
                         "gold": r.answer, **({"alt_golds": list(r.alt_answers)} if r.alt_answers else {}),
                         "response": c.text, "extracted": it.extracted, "correct": it.correct,
                         "status": it.status, "truncated": c.truncated, "perplexity": c.perplexity})
    return rows
