"""Which checkpoint each method reports: the final one and the best on
validation, side by side, with what each scored; with the paper's
checkpoint protocol on (train.snapshot_every), also the best of the kept
snapshots on the test sets themselves, marked as optimistic."""

from __future__ import annotations

import numpy as np

from rlvr import stats
from rlvr.report.format import fmt, markdown
from rlvr.report.inputs import MethodResults, per_problem
from rlvr.runs import BASE


def selected_checkpoints(results, kind: str) -> list[list[str]]:
    """Per trained method: the final model and the best-on-validation snapshot,
    each scored on the test sets (mean over benchmarks, 95% interval over
    problems, per-problem values averaged over seeds)."""
    body = []
    for name, m in results.items():
        picks = [_final_and_best(bs) for bs in m.by_step
                 if any(e.get("validation") is not None for e in bs.values())]  # trained with validation
        if name == BASE or not picks:
            continue
        final = _snapshot_values([f for f, _ in picks], m, kind)
        best = _snapshot_values([b for _, b in picks], m, kind)
        val = [b.get("validation") for _, b in picks if b.get("validation") is not None]
        body.append([name, "/".join(f["step"] for f, _ in picks), fmt(stats.mean_ci(list(final.values()))),
                     "/".join(b["step"] for _, b in picks), f"{np.mean(val):.3f}" if val else "-",
                     fmt(stats.mean_ci(list(best.values())))])
    return body


def _final_and_best(by_step: dict) -> tuple[dict, dict]:
    """One seed's by_step.json entries (each with its "step"): the final model
    (the last step) and the best on validation (the final one if none is marked)."""
    entries = [dict(e, step=s) for s, e in sorted(by_step.items(), key=lambda kv: int(kv[0]))]
    return entries[-1], next((e for e in entries if e.get("best")), entries[-1])


def _snapshot_values(entries: list[dict], m: MethodResults, kind: str) -> dict[str, np.ndarray]:
    """Per-problem values of one checkpoint per seed, averaged over the seeds."""
    template = m.problems[0]
    per_seed = []
    for e in entries:
        rows = [dict(t, correct=c, majority=mj) for t, (c, mj) in zip(template, e["problems"])]
        per_seed.append(per_problem(rows, kind))
    return {b: np.mean([p[b] for p in per_seed], axis=0) for b in per_seed[0]}


def selected_on_test_sets(results, kind: str) -> list[list[str]]:
    """Per trained method with the paper's protocol on: each seed's best
    snapshot on the test sets (mean over benchmarks; ties: the earlier), as
    the DisCO paper chose its rows, beside the best on validation and the
    final model, all scored on the test sets."""
    body = []
    for name, m in results.items():
        seeds = [bs for bs in m.by_step if any(e.get("protocol") for e in bs.values())]
        if name == BASE or not seeds:
            continue
        entries = [[dict(e, step=s) for s, e in sorted(bs.items(), key=lambda kv: int(kv[0]))] for bs in seeds]
        chosen = [max((e for e in es if e.get("protocol")), key=lambda e: _mean(_snapshot_values([e], m, kind)))
                  for es in entries]
        finals = [es[-1] for es in entries]
        validated = [next((e for e in es if e.get("best")), None) for es in entries]
        on_validation = "-" if None in validated else fmt(
            stats.mean_ci(list(_snapshot_values(validated, m, kind).values())))
        body.append([name, "/".join(str(sum(1 for e in es if e.get("protocol"))) for es in entries),
                     "/".join(e["step"] for e in chosen),
                     fmt(stats.mean_ci(list(_snapshot_values(chosen, m, kind).values()))), on_validation,
                     fmt(stats.mean_ci(list(_snapshot_values(finals, m, kind).values())))])
    return body


def _mean(values: dict[str, np.ndarray]) -> float:
    return float(np.mean([v.mean() for v in values.values()]))


PAPER_PROTOCOL = (
    "**The paper's protocol (optimistic: selected on the test sets).** With `train.snapshot_every` a snapshot is "
    "kept every so many steps and each is scored on the test sets; the best of them on the test sets is what the "
    "DisCO paper reports for each row. The selection saw the test sets, so its score is a maximum over the "
    "snapshots: it compares with the published rows, and its interval (over problems) does not cover the "
    "selection. Every other table reports the held-out choice.")


def checkpoint_section(results, k: int) -> str | None:
    """The report's checkpoint-selection section, its heading naming what it holds."""
    parts = []
    body = selected_checkpoints(results, "avg")
    if body:
        parts.append("The best checkpoint is chosen on validation during training (problems held out of the "
                     "training mixture, the light profile of `validation:`), never on the test sets; both are then "
                     "scored with the full protocol. Steps are per seed.\n\n"
                     + markdown(["method", "final step", f"final, test avg@{k}", "best step (validation)",
                                 "validation avg@k", f"best, test avg@{k}"], body))
    protocol = selected_on_test_sets(results, "avg")
    if protocol:
        parts.append(PAPER_PROTOCOL + "\n\n" + markdown(
            ["method", "snapshots scored", "best step (test sets)",
             f"paper's protocol: best on the test sets, test avg@{k} (optimistic)",
             f"ours: best on validation, test avg@{k}", f"final, test avg@{k}"], protocol))
    if not parts:
        return None
    title = "the final model and the best on validation" + (", and the paper's protocol" if protocol else "")
    return f"## Checkpoint selection: {title}\n\n" + "\n\n".join(parts)
