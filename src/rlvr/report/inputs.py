"""The report's inputs: every evaluated run's metrics, problems, steps and
checkpoint scores, grouped by method (rlvr.runs names the files)."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rlvr.evaluation.metrics import pass_at_k
from rlvr.runs import Run

KINDS = ("avg", "pass", "maj")
DIVERSITY = ("distinct", "perplexity")  # per problem: distinct answers, mean perplexity of the samples


@dataclass
class MethodResults:
    """Every evaluated seed of one method (the base model: one 'seed')."""

    name: str
    metrics: list[dict] = field(default_factory=list)  # metrics.json per seed
    problems: list[list[dict]] = field(default_factory=list)  # problems.jsonl per seed
    samples: list[list[dict]] = field(default_factory=list)  # samples.jsonl per seed (the reward-hack audit)
    steps: list[list[dict]] = field(default_factory=list)  # steps.csv per seed
    by_step: list[dict] = field(default_factory=list)  # by_step.json "steps" per seed
    seeds: list[int | None] = field(default_factory=list)
    external: bool = False  # a released checkpoint evaluated as a row (`checkpoints:`), not trained here
    mean_sets: list[str] | None = None  # what a mean over sets averages (the report sets it: sections.mean_sets)

    @property
    def label(self) -> str:
        """Its row's name in the tables: a released checkpoint says so."""
        return f"{self.name} (released checkpoint)" if self.external else self.name

    @property
    def k(self) -> int | str:
        """Samples per problem, or "k" when the sets were sampled with different k."""
        per_set = set((self.metrics[0].get("k_per_set") or {}).values())
        return "k" if len(per_set) > 1 else self.metrics[0]["k"]

    @property
    def benchmarks(self) -> list[str]:
        return list(self.metrics[0]["benchmarks"])

    def values(self, kind: str) -> dict[str, np.ndarray]:
        """Per benchmark: each problem's value, averaged over seeds (aligned by problem)."""
        per_seed = [per_problem(rows, kind) for rows in self.problems]
        return {b: np.mean([s[b] for s in per_seed], axis=0) for b in per_seed[0]}

    def accuracy_by_question(self) -> list[float]:
        return [float(v) for arr in self.values("avg").values() for v in arr]

    def has(self, kind: str) -> bool:
        """Every problem row of every seed carries `kind` (older evaluations lack the diversity columns)."""
        return kind not in DIVERSITY or all(r.get(kind) is not None for rows in self.problems for r in rows)

    def pass_curve(self) -> list[tuple[int, float]]:
        """(j, pass@j) for j = 1..k: the unbiased estimator per problem, averaged
        over a set's problems, then over sets and seeds (SIREN's pass@k curve)."""
        ks = {r["k"] for rows in self.problems for r in rows}
        if len(ks) != 1:
            return []  # sets sampled with different k: no common curve
        k = ks.pop()
        curve = []
        for j in range(1, k + 1):
            per_seed = []
            for rows in self.problems:
                by_set = defaultdict(list)
                for r in rows:
                    by_set[r["benchmark"]].append(pass_at_k(r["k"], r["correct"], j))
                per_seed.append(np.mean([np.mean(v) for v in by_set.values()]))
            curve.append((j, float(np.mean(per_seed))))
        return curve


def per_problem(rows: list[dict], kind: str) -> dict[str, np.ndarray]:
    """avg: share of the k samples correct; pass: pass@k (any correct); maj: maj@k;
    distinct: distinct answers among the k; perplexity: the samples' mean perplexity."""
    out = defaultdict(list)
    for r in rows:
        if kind in DIVERSITY:
            value = float(r[kind])
        else:
            value = {"avg": r["correct"] / r["k"], "pass": float(r["correct"] > 0), "maj": float(r["majority"])}[kind]
        out[r["benchmark"]].append(value)
    return {b: np.asarray(v) for b, v in out.items()}


def _read_csv(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return [{k: _num(v) for k, v in r.items()} for r in csv.DictReader(f)]


def _read_steps(path: Path) -> list[dict]:
    """A trained run's step log; missing or without a step, the report would
    show a training with no curve and empty claims: an error instead."""
    rows = _read_csv(path)
    if not rows:
        raise FileNotFoundError(f"{path} is {'empty' if path.exists() else 'missing'} but its run was evaluated: "
                                "rerun its train stage (dvc repro train@<method>-<seed>)")
    return rows


def _num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return v


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def load_results(root: Path, runs: list[Run]) -> dict[str, MethodResults]:
    """Evaluated runs grouped by method, in the order of `runs`."""
    out: dict[str, MethodResults] = {}
    for run in runs:
        metrics_file = root / run.eval_dir / "metrics.json"
        if not metrics_file.exists():
            continue
        m = out.setdefault(run.method, MethodResults(run.method, external=run.external))
        m.metrics.append(json.loads(metrics_file.read_text()))
        m.problems.append(_read_jsonl(root / run.eval_dir / "problems.jsonl"))
        m.samples.append(_read_jsonl(root / run.eval_dir / "samples.jsonl"))
        m.steps.append(_read_steps(root / run.train_dir / "steps.csv") if run.trained else [])
        by_step = root / run.eval_dir / "by_step.json"
        m.by_step.append(json.loads(by_step.read_text())["steps"] if by_step.exists() else {})
        m.seeds.append(run.seed)
    return out
