"""The papers' claims checked on small fixed outputs: each row's statistic, verdict and published size."""

import pytest
import report_helpers
import yaml
from report_helpers import write_eval, write_steps

from rlvr.report import build_report
from rlvr.runs import Run


def test_claims_table(report):
    root, _ = report
    md = (root / "reports/results.md").read_text()
    claims = md.split("## The papers' claims")[1].split("## Figures")[0]
    # GRPO's entropy: 1 - 0.2 * step, an exact line: "falls" is supported with a zero-width interval
    assert "| GRPO's entropy falls during training | minus the slope of entropy per step (grpo) | +0.2 [+0.2, +0.2]" \
        " | – | supported (one seed) |" in claims
    assert "| disco_logl's entropy stays stable | entropy slope per step (disco_logl), within +-" in claims
    assert "| disco_logl above grpo on accuracy |" in claims and "inconclusive" in claims
    # the paper's size of the same statistic (profile 1.5b: DisCO log-L 0.533 - GRPO 0.457), against our interval
    row = next(line for line in claims.splitlines() if line.startswith("| disco_logl above grpo"))
    assert "| +0.076 (inside ours) |" in row or "| +0.076 (outside ours) |" in row
    # one seed per method: every verdict says so, and the page says what the intervals leave out
    assert "(one seed): a run with a single seed" in claims
    assert "not the randomness of training" in md.split("## Main table")[0]


def test_published_sizes_and_whether_our_interval_holds_them():
    from rlvr.report.claims import headline_gain, published_cell, table_gain

    entry = {"source": "its table", "rows": [
        {"method": "grpo", "avg": 0.457}, {"method": "disco_logl", "avg": 0.533}, {"method": "grpo", "avg": 0.1},
        {"method": "dsr", "mrl": "24k/8k", "avg": 0.488}, {"method": "dsr", "mrl": "24k/32k", "avg": 0.525}],
        "headline": {"maj_at_k_gain_over_best_baseline": 4.8, "aime": 6.6},
        "headline_sources": {"maj_at_k_gain_over_best_baseline": "its abstract"}}
    assert table_gain(entry, "disco_logl", "grpo") == pytest.approx(0.076)  # the first row of each method
    assert table_gain(entry, "disco_logl", "dsr", "24k/32k") == pytest.approx(0.008)  # the reference's named row
    assert table_gain(entry, "disco_logl", "dapo") is None and table_gain({}, "a", "b") is None
    assert headline_gain("maj_at_k_gain_over_best_baseline")(entry, "siren", "grpo") == pytest.approx(0.048)
    # a value without a source is never compared with
    assert table_gain({**entry, "source": None}, "disco_logl", "grpo") is None
    assert headline_gain("aime")(entry, "siren", "grpo") is None
    assert published_cell(0.076, 0.01, 0.08) == "+0.076 (inside ours)"
    assert published_cell(0.076, 0.08, 0.1) == "+0.076 (outside ours)"
    assert published_cell(None, 0.0, 1.0) == "–"


def test_siren_entropy_claims_compare_the_slopes_with_each_baseline(tmp_path, repo):
    """SIREN's claim on the entropy its trainer logs (top-p) and on the full entropy:
    slopes per step, SIREN's minus each baseline's; no invented band."""
    runs = [Run("base"), Run("grpo", 0), Run("siren", 0), Run("entropy_reg", 0)]
    for run, c in zip(runs, ({"a": 1, "b": 0, "c": 0}, {"a": 2, "b": 0, "c": 1}, {"a": 2, "b": 1, "c": 1},
                             {"a": 2, "b": 1, "c": 0})):
        write_eval(tmp_path, run, c)
    slopes = {"grpo": -0.1, "siren": -0.02, "entropy_reg": 0.05}
    for run in runs[1:]:
        write_steps(tmp_path, run, [0.1, 0.2, 0.3, 0.4, 0.5], entropy_slope=slopes[run.method],
                    extra={"topp_entropy": lambda i, m=run.method: 0.5 + 2 * slopes[m] * i})
    build_report(runs, tmp_path, tmp_path / "reports", repo / "data/vendor/paper_results.yaml",
                 "siren_qwen2.5_math_7b", {"grpo": "grpo", "siren": "siren", "entropy_reg": "entropy_reg"})
    claims = (tmp_path / "reports/results.md").read_text().split("## The papers' claims")[1].split("\n## ")[0]
    assert "anchor" not in claims and "claimed within" not in claims
    lines = {line.split(" | ")[0][2:]: line for line in claims.splitlines() if line.startswith("| siren")}
    # against a baseline whose entropy collapses (grpo): SIREN's falls less
    assert "+0.16 [+0.16, +0.16]" in lines["siren's top-p entropy falls less than grpo's (no collapse)"]
    assert "supported" in lines["siren's top-p entropy falls less than grpo's (no collapse)"]
    # against naive regularization, whose entropy the paper says explodes: SIREN's rises less
    assert "+0.14 [+0.14, +0.14]" in lines["siren's top-p entropy rises less than entropy_reg's (no explosion)"]
    assert "supported" in lines["siren's top-p entropy rises less than entropy_reg's (no explosion)"]
    assert "siren's top-p entropy falls less than entropy_reg's (no collapse)" not in lines
    assert "+0.08 [+0.08, +0.08]" in lines["siren's full-vocabulary entropy falls less than grpo's (no collapse)"]
    # kept in a band: the first step's 0.46 allows +-0.2 x 0.46 / 4 steps = 0.023 per step; it falls 0.04
    assert "-0.04 [-0.04, -0.04]" in lines["siren's top-p entropy stays in a band"]
    assert "within +-0.023" in lines["siren's top-p entropy stays in a band"]
    assert "contradicted" in lines["siren's top-p entropy stays in a band"]
    # diversity is claimed against the collapsing baselines only
    assert not any("entropy_reg" in k for k in lines if "perplexity" in k or "distinct" in k)
    # the maj@k gain over the best baseline: the 4.8 points have no source, so no published size is shown
    assert "| – |" in lines["siren gains maj@k over the best baseline"]


def test_the_aime_claim_reads_only_aime_and_only_where_it_was_evaluated(tmp_path, repo, monkeypatch):
    from rlvr.report.claims import all_claim_rows
    from rlvr.report.inputs import load_results

    runs = [Run("base"), Run("grpo", 0), Run("siren", 0)]
    monkeypatch.setattr(report_helpers, "BENCH", {"aime24": ["a", "b"], "math500": ["c"]})
    for run, c in zip(runs, ({"a": 0, "b": 0, "c": 0}, {"a": 0, "b": 1, "c": 2}, {"a": 2, "b": 1, "c": 0})):
        write_eval(tmp_path, run, c)
    rows = all_claim_rows(load_results(tmp_path, runs), {"grpo": "grpo", "siren": "siren"}, 2,
                          {"headline": {"aime24_25_maj_at_k_gain": 6.6},
                           "headline_sources": {"aime24_25_maj_at_k_gain": "abstract"}})
    aime = next(r for r in rows if "AIME24/25" in r[0])
    # maj@2 = correct * 2 > k: siren a 1, b 0; grpo a 0, b 0 -> +0.5 on aime24 (math500's c is not read)
    assert aime[2].startswith("+0.5 [") and aime[3].startswith("+0.066 (")
    monkeypatch.setattr(report_helpers, "BENCH", {"math500": ["c"]})
    other = tmp_path / "other"
    for run, c in zip(runs, ({"c": 0}, {"c": 2}, {"c": 0})):
        write_eval(other, run, c)
    assert not any("AIME24/25" in r[0] for r in all_claim_rows(load_results(other, runs), {"siren": "siren"}, 2))


def test_claims_are_about_main_methods_against_the_papers_own_baselines(tmp_path, repo):
    """No claim row on an ablation variant; the best baseline is one of the
    paper's (a DisCO method trained beside SIREN is not); the difficulty bias
    is GRPO_RW against GRPO; Fig. 2's statements are rows of their own."""
    runs = [Run("base"), Run("grpo", 0), Run("siren", 0), Run("siren_wo_anchor", 0), Run("disco_logl", 0),
            Run("grpo_rw", 0), Run("dapo", 0), Run("dr_grpo", 0)]
    for run, c in zip(runs, ({"a": 0, "b": 0, "c": 0}, {"a": 1, "b": 1, "c": 0}, {"a": 2, "b": 1, "c": 1},
                             {"a": 1, "b": 0, "c": 1}, {"a": 2, "b": 2, "c": 2}, {"a": 2, "b": 0, "c": 0},
                             {"a": 1, "b": 0, "c": 0}, {"a": 0, "b": 1, "c": 0})):
        write_eval(tmp_path, run, c)
    for run in runs[1:]:
        write_steps(tmp_path, run, [0.1, 0.2, 0.3, 0.4, 0.5], entropy_slope=0.05 if run.method == "dapo" else -0.1)
    objectives = {"grpo": "grpo", "siren": "siren", "siren_wo_anchor": "siren", "disco_logl": "disco",
                  "grpo_rw": "grpo_rw", "dapo": "dapo", "dr_grpo": "dr_grpo"}
    build_report(runs, tmp_path, tmp_path / "reports", repo / "data/vendor/paper_results.yaml",
                 "siren_qwen2.5_math_7b", objectives, {"siren_wo_anchor": "siren"})
    claims = (tmp_path / "reports/results.md").read_text().split("## The papers' claims")[1].split("\n## ")[0]
    rows = [line for line in claims.splitlines() if line.startswith("| ") and not line.startswith("| claim")]
    assert not any(r.startswith("| siren_wo_anchor") for r in rows)
    best = next(r for r in rows if r.startswith("| siren gains maj@k over the best baseline"))
    assert "siren - grpo |" in best or "siren - dr_grpo |" in best  # disco_logl scores higher, but is not SIREN's
    assert any(r.startswith("| fewer all-wrong training groups under grpo_rw than grpo") for r in rows)
    assert not any("under disco_logl" in r for r in rows)
    assert any(r.startswith("| DAPO's entropy rises during training") and "supported" in r for r in rows)
    assert any(r.startswith("| Dr. GRPO's entropy falls during training") and "supported" in r for r in rows)


def test_the_new_claim_rows_by_hand(tmp_path, repo):
    """DisCO's reward still rising where GRPO's saturated, the difficulty bias
    on the training batches, SIREN's validation pass@k kept, the coefficient
    sweep's two directions and DisCO (8k) beside DeepScaleR's 24k/32k row,
    each with where the paper states it."""
    from rlvr.report.claims import all_claim_rows
    from rlvr.report.inputs import load_results

    runs = [Run("base"), Run("grpo", 0), Run("disco_logl", 0), Run("grpo_rw", 0), Run("siren", 0),
            Run("entropy_reg_small", 0), Run("entropy_reg_large", 0), Run("deepscaler_preview_32k", external=True)]
    for run in runs:
        write_eval(tmp_path, run, {"a": 1, "b": 1, "c": 1})
    six = range(1, 7)
    write_steps(tmp_path, runs[1], [0.1, 0.3, 0.5, 0.5, 0.5, 0.5])  # saturated from step 3
    write_steps(tmp_path, runs[2], [0.1 * i for i in six])  # rising 0.1 a step throughout
    write_steps(tmp_path, runs[3], [0.1] * 6, extra={"all_wrong_groups": lambda i: 0.2})  # grpo's: 0.5 - 0.05 i
    write_steps(tmp_path, runs[4], [0.1] * 6, extra={"val_pass@k": lambda i: 0.5})
    write_steps(tmp_path, runs[5], [0.1] * 6, entropy_slope=-0.1)
    write_steps(tmp_path, runs[6], [0.1] * 6, entropy_slope=0.05)
    objectives = {"grpo": "grpo", "disco_logl": "disco", "grpo_rw": "grpo_rw", "siren": "siren",
                  "entropy_reg_small": "entropy_reg", "entropy_reg_large": "entropy_reg"}
    paper = yaml.safe_load((repo / "data/vendor/paper_results.yaml").read_text())
    rows = {r[0]: r for r in all_claim_rows(load_results(tmp_path, runs), objectives, 2, paper["1.5b"])}
    # second half (steps 4-6): DisCO's slope 0.1, GRPO's 0: exact lines
    rise = rows["disco_logl's training reward keeps rising where grpo's saturates"]
    assert rise[2] == "+0.1 [+0.1, +0.1]" and rise[4].startswith("supported") and "Fig. 2" in rise[5]
    # all-wrong shares per step: grpo 0.45 .. 0.2, grpo_rw 0.2: paired differences 0.25 .. 0, mean 0.125
    bias = rows["fewer all-wrong training groups under grpo_rw than grpo"]
    assert bias[2].startswith("+0.125 [") and bias[4].startswith("supported") and "solve_none" in bias[5]
    # validation pass@k flat: slope 0, above the floor -0.2 x 0.5 / 5 steps = -0.02
    kept = rows["siren keeps its validation pass@k through training"]
    assert kept[2] == "+0 [+0, +0]" and "above -0.02" in kept[1] and kept[4].startswith("supported")
    assert "the paper states none" in kept[1] and "abstract" in kept[5]
    # the sweep: each coefficient's own direction, no row crossing them
    small = rows["naive entropy regularization with a small coefficient (entropy_reg_small)'s entropy falls "
                 "during training"]
    large = rows["naive entropy regularization with a large coefficient (entropy_reg_large): entropy rises"]
    assert small[4].startswith("supported") and large[4].startswith("supported")
    assert not any("entropy_reg_small" in r[0] and "rises" in r[0] for r in rows.values())
    # DeepScaleR evaluated at 32k (its own eval: in the recipe), the paper's 24k/32k row: DisCO log-L 0.533 - 0.525
    dsr = rows["disco_logl (8k) on par with or above deepscaler_preview_32k (24k training, 32k evaluation)"]
    assert dsr[3].startswith("+0.008 (")


def test_a_claim_on_a_column_never_logged_has_no_row(tmp_path, repo):
    """Without validation (eval_every 0) no step logs val_pass@k: SIREN's
    validation claims are left out, not shown as nan."""
    from rlvr.report.claims import all_claim_rows
    from rlvr.report.inputs import load_results

    runs = [Run("base"), Run("grpo", 0), Run("siren", 0)]
    for run in runs:
        write_eval(tmp_path, run, {"a": 1, "b": 1, "c": 1})
    rows = all_claim_rows(load_results(tmp_path, runs), {"grpo": "grpo", "siren": "siren"}, 2)
    assert rows and not any("validation" in r[0] for r in rows)

