"""The training-dynamics curves: a method's seeds drawn under their mean."""

from __future__ import annotations

from rlvr.report import figures


def _lines(monkeypatch, steps):
    drawn = {}
    monkeypatch.setattr(figures, "_save", lambda fig, path: drawn.setdefault("fig", fig) and path)
    figures.curve_figure(steps, [("reward_mean", "reward")], "unused.png", "t", {"grpo": "C1", "siren": "C3"})
    ax = drawn["fig"].axes[0]
    return {line.get_label(): (list(line.get_xdata()), list(line.get_ydata()), line.get_alpha())
            for line in ax.get_lines()}


def test_seeds_are_thin_lines_under_their_mean_at_the_steps_all_logged(monkeypatch):
    steps = {"grpo/seed0": [{"step": 1, "reward_mean": 0.2}, {"step": 2, "reward_mean": 0.4}],
             "grpo/seed1": [{"step": 1, "reward_mean": 0.6}, {"step": 2, "reward_mean": 0.8},
                            {"step": 3, "reward_mean": 1.0}],  # step 3: one seed only, outside the mean
             "siren/seed0": [{"step": 1, "reward_mean": 0.1}, {"step": 2, "reward_mean": None}],
             "disco_logl/seed0": [{"step": 1}], "disco_logl/seed1": [{"step": 1}]}  # never logged it: no line
    lines = _lines(monkeypatch, steps)
    x, y, _ = lines["grpo (mean of 2 seeds)"]
    assert x == [1, 2] and [round(v, 9) for v in y] == [0.4, 0.6]
    thin = [v for k, v in lines.items() if k.startswith("_")]  # unlabelled: the seeds themselves
    assert len(thin) == 2 and all(alpha == 0.35 for _, _, alpha in thin)
    # one run of a method is its own line, labelled by run; a missing value is skipped
    assert lines["siren/seed0"][:2] == ([1], [0.1])
    assert len(lines) == 4
