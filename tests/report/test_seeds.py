"""Seeds averaged, and the spread between them shown."""

from report_helpers import RUNS, write_eval

from rlvr.report import build_report
from rlvr.runs import Run


def test_seeds_are_averaged_and_their_spread_shown(tmp_path):
    write_eval(tmp_path, RUNS[0], {"a": 0, "b": 0, "c": 0})
    write_eval(tmp_path, Run("grpo", 0), {"a": 2, "b": 0, "c": 0})
    write_eval(tmp_path, Run("grpo", 1), {"a": 0, "b": 0, "c": 2})
    out = build_report([RUNS[0], Run("grpo", 0), Run("grpo", 1)], tmp_path, tmp_path / "reports")
    # seed-averaged problems: a 0.5, b 0, c 0.5 -> arithmetic 0.25, math500 0.5, mean 0.375
    assert [round(c[0], 6) for c in out["tables"]["avg"]["rows"]["grpo"]] == [0.25, 0.5, 0.375]
    md = (tmp_path / "reports/results.md").read_text()
    # seed 0: (0.5 + 0) / 2 = 0.25; seed 1: (0 + 1) / 2 = 0.5 -> sd 0.177, range 0.25; the mean's t interval
    # over 2 seeds: 0.375 +- t(0.975, 1) 12.706 x 0.177 / sqrt(2) = 0.375 +- 1.588
    assert "| grpo | s0: 0.250, s1: 0.500 | 0.375 [-1.213, 1.963] | 0.177 | 0.250 |" in md
    # on arithmetic alone: seed 0 0.5, seed 1 0 -> 0.25 +- 12.706 x 0.354 / sqrt(2) = 0.25 +- 3.177
    arithmetic = md.split("### Seeds on arithmetic")[1].split("###")[0]
    assert "| grpo | s0: 0.500, s1: 0.000 | 0.250 [-2.927, 3.427] | 0.354 | 0.500 |" in arithmetic
    assert "(one seed)" not in md and "not the randomness of training" not in md  # two seeds: nothing to caveat

