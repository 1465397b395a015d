"""The spread between seeds: each seed's score, their mean with its t interval, and
the lead of one method over another measured against that spread."""

from __future__ import annotations

import numpy as np

from rlvr import stats
from rlvr.report.format import markdown
from rlvr.report.inputs import MethodResults, per_problem
from rlvr.runs import BASE

REFERENCE = "grpo"  # the baseline both papers compare against, as the paired tables


def seed_means(m: MethodResults, kind: str, bench: str | None = None) -> list[float]:
    """Each seed's score on `bench`, or its mean over the sets (None)."""
    sets = [bench] if bench else m.benchmarks
    return [float(np.mean([per_problem(p, kind)[b].mean() for b in sets])) for p in m.problems]


def seeds_lead(a: MethodResults, b: MethodResults, kind: str,
               bench: str | None = None) -> tuple[float, float, float] | None:
    """a - b over the seeds' scores on `bench` (None: the mean over the sets; Welch),
    where the spread between seeds is measured:
    each trained one of the two has two seeds or more (an untrained model, the base,
    has no training randomness: its one value stands for every seed). None: it is not."""
    if any(m.name != BASE and len(m.seeds) < 2 for m in (a, b)):
        return None
    ma, mb = seed_means(a, kind, bench), seed_means(b, kind, bench)
    return stats.welch_diff_ci(ma if len(ma) > 1 else ma * 2, mb if len(mb) > 1 else mb * 2)


def seeds_table(results, kind: str, bench: str | None = None) -> str | None:
    """Each seed's score on `bench` (None: the mean over the sets), their mean with its
    t interval over seeds, and the spread between seeds."""
    trained = {n: m for n, m in results.items() if n != BASE and len(m.seeds) > 1}
    if not trained:
        return None
    body, reference = [], REFERENCE if REFERENCE in trained and len(trained) > 1 else None
    for name, m in trained.items():
        means = seed_means(m, kind, bench)
        est, lo, hi = stats.t_mean_ci(means)
        row = [name, ", ".join(f"s{s}: {v:.3f}" for s, v in zip(m.seeds, means)),
               f"{est:.3f} [{lo:.3f}, {hi:.3f}]", f"{float(np.std(means, ddof=1)):.3f}", f"{np.ptp(means):.3f}"]
        if reference:
            d, dlo, dhi = seeds_lead(m, trained[reference], kind, bench)
            row.append("–" if name == reference else f"{d:+.3f} [{dlo:+.3f}, {dhi:+.3f}]")
        body.append(row)
    return markdown(["method", f"{kind}@k per seed", "mean over seeds [95% t interval over seeds]",
                     "sd between seeds", "range",
                     *([f"minus {reference}, over seeds [95% Welch]"] if reference else [])], body)


def seeds_section(results, kind: str) -> str | None:
    """The seeds tables: on the mean over the sets, then on each set."""
    first = next(iter(results.values()))
    parts = [(None, seeds_table(results, kind))] + [(b, seeds_table(results, kind, b)) for b in first.benchmarks]
    if parts[0][1] is None:
        return None
    return "\n\n".join(f"### Seeds on {b or 'the mean over sets'}\n\n{md}" for b, md in parts)
