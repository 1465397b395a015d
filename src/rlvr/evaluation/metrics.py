"""Evaluation metrics over k graded samples per problem.

avg@k  mean correctness over all samples (the papers' "pass@1 averaged over k")
pass@k unbiased estimator 1 - C(n-c, k) / C(n, k) (Chen et al., 2021)
maj@k  correctness of the largest cluster of equivalent answers (from the verifier)
"""

from __future__ import annotations

from math import comb


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k samples drawn without replacement
    from n samples (c of them correct) is correct."""
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    if n - c < k:  # every draw of k must contain a correct sample
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_ks(n: int) -> list[int]:
    """The k reported for n samples: powers of two below n, and n itself."""
    ks, k = [], 1
    while k < n:
        ks.append(k)
        k *= 2
    return ks + [n]


def summarize(correct: list[list[bool]], majority: list[bool]) -> dict[str, float]:
    """Metrics of one set of problems: `correct[p]` holds the k sample results
    of problem p, `majority[p]` its maj@k. All problems must have the same k."""
    if not correct:
        return {}
    n = len(correct[0])
    if any(len(c) != n for c in correct):
        raise ValueError("every problem needs the same number of samples")
    if len(majority) != len(correct):
        raise ValueError("one majority result per problem")
    out = {f"avg@{n}": sum(sum(c) for c in correct) / (n * len(correct))}
    for k in pass_ks(n):
        out[f"pass@{k}"] = sum(pass_at_k(n, sum(c), k) for c in correct) / len(correct)
    out[f"maj@{n}"] = sum(majority) / len(majority)
    # The same at this set's own k: comparable across sets sampled with different k (SIREN's protocol).
    out.update({"avg@k": out[f"avg@{n}"], "pass@k": out[f"pass@{n}"], "maj@k": out[f"maj@{n}"]})
    out["n_problems"] = float(len(correct))
    return out


def mean_over(per_set: dict[str, dict[str, float]]) -> dict[str, float]:
    """Unweighted mean of each metric over benchmarks (n_problems is summed)."""
    if not per_set:
        return {}
    keys = set.intersection(*(set(m) for m in per_set.values()))
    out = {k: sum(m[k] for m in per_set.values()) / len(per_set) for k in keys if k != "n_problems"}
    out["n_problems"] = sum(m.get("n_problems", 0) for m in per_set.values())
    return dict(sorted(out.items()))


def validation_columns(metrics: dict, problems: list[dict]) -> dict[str, float]:
    """A validation's steps.csv columns: avg@k, pass@k and maj@k over its problems, and the 95%
    bootstrap interval of avg@k over them (what the tuning sweep's table shows); {} off rank 0."""
    from rlvr.stats import mean_ci

    mean = metrics.get("mean", {})
    out = {f"val_{m}": mean[m] for m in ("avg@k", "pass@k", "maj@k") if m in mean}
    if problems:
        import numpy as np

        _, out["val_avg@k_low"], out["val_avg@k_high"] = mean_ci([np.array([p["correct"] / p["k"]
                                                                             for p in problems])])
    return out
