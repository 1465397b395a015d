"""The training-dynamics curves: a method's seeds drawn under their mean; a method's one colour
in every figure, and in MLflow."""

from __future__ import annotations

from report_helpers import write_eval

from rlvr.report import build_report, figures
from rlvr.runs import Run


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


def test_each_method_keeps_its_colour_in_every_figure(tmp_path, repo, monkeypatch):
    """Every figure's lines and bars, read back from the matplotlib artists before
    saving: a method has one colour across the report, its seeds included."""
    from matplotlib.colors import to_hex
    from matplotlib.container import BarContainer

    from rlvr.report import figures

    seen: dict[str, dict[str, set]] = {}
    save = figures._save

    def recording(fig, path):
        for ax in fig.axes:
            for line in ax.get_lines():
                if not line.get_label().startswith("_"):
                    method = line.get_label().split("/seed")[0].split(" (mean of")[0]  # grpo/seed0, grpo (mean of 2 seeds)
                    seen.setdefault(method, {}).setdefault(to_hex(line.get_color()), set()).add(path.name)
            for bars in ax.containers:
                if not isinstance(bars, BarContainer):  # error bars
                    continue
                if bars.get_label() and not bars.get_label().startswith("_"):
                    seen.setdefault(bars.get_label(), {}).setdefault(to_hex(bars[0].get_facecolor()), set()).add(
                        path.name)
                elif bars.orientation == "horizontal":  # the scores figure: a bar per method, named on the y axis
                    names = [t.get_text() for t in ax.get_yticklabels()]
                    for name, bar in zip(names, bars):
                        seen.setdefault(name, {}).setdefault(to_hex(bar.get_facecolor()), set()).add(path.name)
        return save(fig, path)

    monkeypatch.setattr(figures, "_save", recording)
    levels = {"a": 1, "b": 2}
    runs = [Run("base"), Run("grpo", 0), Run("grpo", 1), Run("disco_logl", 0)]
    for run, correct in zip(runs, ({"a": 1, "b": 0, "c": 0}, {"a": 2, "b": 0, "c": 1}, {"a": 2, "b": 1, "c": 0},
                                   {"a": 2, "b": 1, "c": 1})):
        write_eval(tmp_path, run, correct, levels=levels)
    build_report(runs, tmp_path, tmp_path / "reports")
    drawn = {name: files for name, colours in seen.items() for files in colours.values()}
    assert {"base", "grpo", "disco_logl"} <= set(seen)
    assert all(len(colours) == 1 for colours in seen.values()), seen
    assert len({next(iter(c)) for c in seen.values()}) == len(seen)  # and no two methods share one
    assert len(drawn["grpo"]) >= 4  # in the scores, training, difficulty and pass@k figures at least
    # and the report says which is which, by name (MLflow's own colours are per browser)
    from rlvr.runs import COLOR_NAMES

    md = (tmp_path / "reports/results.md").read_text()
    named = ", ".join(f"{m} {COLOR_NAMES[next(iter(seen[m]))]}" for m in ("base", "grpo", "disco_logl"))
    assert f"Each method keeps one colour in every figure: {named}." in md


def test_mlflow_draws_each_training_in_its_report_colour(repo):
    """The train stage tags its MLflow run `mlflow.runColor` with the colour the report
    draws its method in (MLflow 3.17's runs table and charts read that tag)."""
    from rlvr.runs import COLOR_NAMES, run_color
    from rlvr.settings.load import load_params

    params = load_params(repo / "params.yaml")  # the report's models: base, grpo, disco_logl, siren
    assert [COLOR_NAMES[run_color(params, m)] for m in ("grpo", "disco_logl", "siren")] == ["orange", "green", "red"]

