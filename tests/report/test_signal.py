"""The report's reading of each training's steps: informative groups, truncation,
length first -> last, the constraint's share, by hand on planted steps."""

from report_helpers import write_eval, write_steps

from rlvr.report import build_report
from rlvr.runs import Run


def test_each_method_and_seed_shows_what_it_learned_from(tmp_path, repo):
    runs = [Run("base"), Run("grpo", 0), Run("grpo", 1), Run("disco_logl", 0)]
    for run in runs:
        write_eval(tmp_path, run, {"a": 1, "b": 1, "c": 1})
    for run in runs[1:]:
        # zero_variance 0.5 a step; truncation 0.4 at step 1 then 0.1 per step: (0.4 + 0.2 + 0.3) / 3 = 0.3
        write_steps(tmp_path, run, [0.1, 0.2, 0.3], extra={"truncation_rate": lambda i: 0.4 if i == 1 else 0.1 * i})
    build_report(runs, tmp_path, tmp_path / "reports", repo / "data/vendor/paper_results.yaml", None,
                 {"grpo": "grpo", "disco_logl": "disco"})
    md = (tmp_path / "reports/results.md").read_text()
    section = md.split("## What each training learned from")[1].split("\n## ")[0]
    # write_steps: response_length 50 + step (51 -> 53); kl_active 0.5 at every step
    assert "| grpo | 0 | 0.50 | 0.50 | 0.40 | 0.30 | 51.0 -> 53.0 | 0.50 |" in section
    assert "| grpo | 1 | 0.50 | 0.50 | 0.40 | 0.30 | 51.0 -> 53.0 | 0.50 |" in section
    assert "| disco_logl | 0 |" in section and "| base |" not in section  # the untrained model has no steps
