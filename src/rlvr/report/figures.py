"""The report's figures (matplotlib, written as PNG)."""

from __future__ import annotations

from pathlib import Path


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _color(colors: dict[str, str], run: str) -> str | None:
    """A run's colour: its method's (`grpo/seed1` is grpo's)."""
    return colors.get(run.split("/seed")[0])


def _save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})  # no version stamp: the same bytes every build
    _plt().close(fig)
    return path


def curve_figure(steps: dict[str, list[dict]], keys: list[tuple[str, str]], path: Path, title: str,
                 colors: dict[str, str]) -> Path | None:
    """One panel per (column, label) of steps.csv: a method's one run as a line; its
    several seeds as thin lines under their mean over seeds (at the steps every seed
    logged), so that methods read apart and the spread between seeds stays visible."""
    if not any(any(isinstance(r.get(k), float) for r in rows for k, _ in keys) for rows in steps.values()):
        return None
    plt = _plt()
    fig, axes = plt.subplots(1, len(keys), figsize=(5.5 * len(keys), 3.8), squeeze=False)
    methods: dict[str, list[str]] = {}
    for run in steps:
        methods.setdefault(run.split("/seed")[0], []).append(run)
    for ax, (key, label) in zip(axes[0], keys):
        for method, runs in methods.items():
            curves = [{r["step"]: r[key] for r in steps[run] if isinstance(r.get(key), float)} for run in runs]
            curves = [c for c in curves if c]
            if not curves:  # this method logged no such column (an objective without that term)
                continue
            color = _color(colors, runs[0])
            if len(curves) == 1:
                ax.plot(*zip(*sorted(curves[0].items())), marker="o", ms=3, label=runs[0], color=color)
                continue
            for c in curves:
                ax.plot(*zip(*sorted(c.items())), lw=0.8, alpha=0.35, color=color)
            shared = sorted(set.intersection(*(set(c) for c in curves)))
            if shared:
                ax.plot(shared, [sum(c[x] for c in curves) / len(curves) for x in shared], marker="o", ms=3,
                        lw=2, color=color, label=f"{method} (mean of {len(curves)} seeds)")
        ax.set_xlabel("training step")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        if ax.get_lines():  # a panel no run logged stays empty, without a legend
            ax.legend(fontsize=8)
    fig.suptitle(title)
    return _save(fig, path)


def difficulty_figure(accuracy: dict[str, list[float]], level_gains: dict[str, dict[str, float]], metric: str,
                      path: Path, colors: dict[str, str]) -> Path | None:
    """Left: per-question accuracy distribution per run (questions at 0% and 100%
    give no group signal). Right: gain over base per arithmetic level."""
    if "base" not in accuracy or len(accuracy) < 2:
        return None
    plt = _plt()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4))
    runs = list(accuracy)
    bins = sorted({round(v, 4) for vals in accuracy.values() for v in vals})
    width = 0.8 / len(runs)
    for i, run in enumerate(runs):
        vals = accuracy[run]
        shares = [sum(1 for v in vals if round(v, 4) == b) / len(vals) for b in bins]
        ax1.bar([j + i * width for j in range(len(bins))], shares, width, label=run, color=_color(colors, run))
    ax1.set_xticks([j + 0.4 - width / 2 for j in range(len(bins))], [f"{b:.0%}" for b in bins], fontsize=7)
    ax1.set_xlabel("per-question accuracy (k samples, mean over seeds)")
    ax1.set_ylabel("share of questions")
    ax1.set_title("difficulty bias: questions at 0% and 100% give no group signal")
    ax1.legend(fontsize=8)
    if level_gains:
        levels = sorted({lv for g in level_gains.values() for lv in g}, key=int)
        w = 0.8 / len(level_gains)
        for i, (name, g) in enumerate(level_gains.items()):
            ax2.bar([j + i * w for j in range(len(levels))], [g.get(lv, 0.0) for lv in levels], w, label=name,
                    color=_color(colors, name))
        ax2.set_xticks([j + 0.4 - w / 2 for j in range(len(levels))], [f"L{lv}" for lv in levels])
        ax2.axhline(0, color="black", lw=0.8)
        ax2.set_xlabel("arithmetic difficulty level")
        ax2.set_ylabel(f"{metric} gain over base")
        ax2.set_title("accuracy gain per difficulty level")
        ax2.legend(fontsize=8)
    return _save(fig, path)


def scores_figure(rows: dict[str, list[tuple[float, float, float]]], columns: list[str], metric: str,
                  path: Path, colors: dict[str, str]) -> Path | None:
    """The main table as a figure: one panel per set (and the mean), a bar per
    method with its 95% interval."""
    if not rows:
        return None
    plt = _plt()
    methods = list(rows)
    fig, axes = plt.subplots(1, len(columns), figsize=(3.2 * len(columns) + 1.5, 0.45 * len(methods) + 1.6),
                             squeeze=False, sharey=True)
    for j, (ax, col) in enumerate(zip(axes[0], columns)):
        est = [rows[m][j][0] for m in methods]
        err = [[rows[m][j][0] - rows[m][j][1] for m in methods], [rows[m][j][2] - rows[m][j][0] for m in methods]]
        ax.barh(range(len(methods)), est, xerr=err, color=[_color(colors, m) for m in methods], capsize=3)
        for i, (value, high) in enumerate(zip(est, err[1])):  # inside a long bar, after a short one's interval
            inside = value > 0.25
            ax.text(0.02 if inside else value + high + 0.02, i, f"{value:.3f}", va="center", fontsize=8,
                    color="white" if inside else "black")
        ax.set_yticks(range(len(methods)), methods)
        ax.invert_yaxis()
        ax.set_xlim(0, 1)
        ax.set_title(col)
        ax.grid(axis="x", alpha=0.3)
        ax.set_xlabel(metric)
    fig.suptitle(f"{metric} per set with 95% intervals over problems")
    return _save(fig, path)


def pass_curve_figure(curves: dict[str, list[tuple[int, float]]], path: Path, colors: dict[str, str]) -> Path | None:
    """pass@k against k, one line per method (SIREN's exploration argument:
    a policy that keeps exploring gains more from more samples)."""
    curves = {n: c for n, c in curves.items() if len(c) > 1}
    if not curves:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, curve in curves.items():
        ax.plot(*zip(*curve), marker="o", ms=3, label=name, color=_color(colors, name))
    ax.set_xscale("log", base=2)
    ks = sorted({j for curve in curves.values() for j, _ in curve})
    ax.set_xticks(ks, [str(j) for j in ks])
    ax.minorticks_off()
    ax.set_xlabel("k (samples per problem)")
    ax.set_ylabel("pass@k (mean over sets)")
    ax.set_title("pass@k against k")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)
