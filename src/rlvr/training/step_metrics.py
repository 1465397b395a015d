"""One training step's metrics, over the whole batch of every rank.

Each rank adds sums and counts (never ratios), `reduce` adds them over the
ranks and divides once, so a step on 2 ranks reports what the same step on 1
rank would. Wall times take the slowest rank (the step waits for it).

Values may be 0-dim tensors on the rank's device (a loss call's KL, loss and
objective metrics): they are summed there, in float64 as Python would, and
copied to the host once, in `reduce`: one sync per step, not one per value.
"""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager

import torch

from rlvr import distributed

PHASES = ("rollout", "reward", "old_logprobs", "update", "weight_push")


class PhaseTimer:
    """Seconds per phase of a step: `with timer("rollout"): ...` adds to seconds["rollout"]."""

    def __init__(self):
        self.seconds = defaultdict(float)

    @contextmanager
    def __call__(self, name: str):
        t0 = time.perf_counter()
        yield
        self.seconds[name] += time.perf_counter() - t0


class StepMetrics:
    def __init__(self):
        self.means: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])  # name -> [sum, count]
        self.totals: dict[str, float] = defaultdict(float)  # summed over ranks
        self.maxima: dict[str, float] = {}  # max over ranks

    def add(self, name: str, total, count: float = 1.0) -> None:
        if isinstance(total, torch.Tensor):
            total = total.detach().double()
        self.means[name][0] += total
        self.means[name][1] += count

    def add_groups(self, groups) -> None:
        """Rewards, accuracy (overall and per level), lengths, truncation, and
        the shares of groups whose accuracies are all equal (no group signal):
        all correct, all wrong (DisCO's difficulty bias, per step), either."""
        for g in groups:
            n = len(g.responses)
            self.add("reward_mean", sum(g.rewards), n)
            self.add("accuracy", sum(g.correct), n)
            if g.record.level is not None:
                self.add(f"accuracy_L{g.record.level}", sum(g.correct), n)
            self.add("response_length", sum(len(r) for r in g.responses), n)
            self.add("truncation_rate", sum(g.truncated), n)
            self.add("zero_variance_groups", float(not g.informative))
            self.add("all_correct_groups", float(all(g.correct)))
            self.add("all_wrong_groups", float(not any(g.correct)))

    def add_entropies(self, sums: dict, tokens: float) -> None:
        """Token-weighted entropy means (`sums` already summed over tokens)."""
        for name, value in sums.items():
            self.add(name, value, tokens)

    def add_loss_call(self, values: dict) -> None:
        """One loss call's values (loss, KL, and every key the objective
        returned, floats or 0-dim tensors): averaged over all loss calls of
        the step, on all ranks."""
        for name, value in values.items():
            self.add(name, value if isinstance(value, torch.Tensor) else float(value))

    def _on_host(self) -> dict[str, list[float]]:
        """The means' sums as floats: every device value in one copy."""
        on_device = [k for k, (s, _) in self.means.items() if isinstance(s, torch.Tensor)]
        values = torch.stack([self.means[k][0] for k in on_device]).cpu().tolist() if on_device else []
        host = {k: [s, c] for k, (s, c) in self.means.items()}
        for k, v in zip(on_device, values):
            host[k][0] = v
        return host

    def reduce(self) -> dict[str, float]:
        parts = distributed.gather((self._on_host(), dict(self.totals), dict(self.maxima)))
        means, totals, maxima = defaultdict(lambda: [0.0, 0.0]), defaultdict(float), {}
        for m, t, x in parts:
            for k, (s, c) in m.items():
                means[k][0] += s
                means[k][1] += c
            for k, v in t.items():
                totals[k] += v
            for k, v in x.items():
                maxima[k] = max(maxima.get(k, v), v)
        row = {k: s / c for k, (s, c) in sorted(means.items()) if c > 0}
        row.update(totals)
        row.update(maxima)
        row["rollout_tokens_per_s"] = totals.get("rollout_tokens", 0.0) / max(maxima.get("time_rollout", 0.0), 1e-9)
        row["train_tokens_per_s"] = totals.get("train_tokens", 0.0) / max(maxima.get("time_update", 0.0), 1e-9)
        return row
