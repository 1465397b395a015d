"""What each training learned from, read off its steps as a reviewer reads them: the
share of groups whose rewards differ (the only ones a group-relative objective learns
from), the share of responses cut at the token limit, the response length at the first
and last step, and where an objective has one, the share of loss calls whose
constraint was active (DisCO's KL hinge)."""

from __future__ import annotations

from rlvr.report.format import markdown


def _mean(rows: list[dict], key: str) -> float | None:
    values = [r[key] for r in rows if isinstance(r.get(key), float)]
    return sum(values) / len(values) if values else None


def _share(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def signal_rows(results) -> list[list[str]]:
    """One row per trained method and seed."""
    rows = []
    for name, m in results.items():
        for seed, steps in zip(m.seeds, m.steps):
            if not steps:
                continue
            first, last = steps[0], steps[-1]
            informative = lambda rs: None if _mean(rs, "zero_variance_groups") is None else \
                1 - _mean(rs, "zero_variance_groups")  # noqa: E731
            rows.append([name, str(seed), _share(informative([first])), _share(informative(steps)),
                         _share(first.get("truncation_rate")), _share(_mean(steps, "truncation_rate")),
                         f"{first.get('response_length', float('nan')):.1f} -> {last.get('response_length', float('nan')):.1f}",
                         _share(_mean(steps, "kl_active"))])
    return rows


def signal_section(results) -> str | None:
    rows = signal_rows(results)
    if not rows:
        return None
    table = markdown(["method", "seed", "informative groups, step 1", "over the run", "cut at the limit, step 1",
                      "over the run", "response tokens, first -> last step", "constraint active (share of loss calls)"],
                     rows)
    return (f"{table}\n\nA group is informative when its responses' rewards differ; an all-equal group gives a "
            "group-relative objective no signal. The constraint column is the share of loss calls on which an "
            "objective's trust region was active (DisCO's KL hinge; – where an objective has none).")
