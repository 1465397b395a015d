"""A claim's verdict names its scale: far from the paper's (another model or task,
or an order of magnitude fewer steps) it says reproduced at this scale or not;
at the paper's scale it keeps the words of the claim as stated."""

import pytest
from report_helpers import write_eval, write_steps

from rlvr.report import build_report
from rlvr.report.scale import PAPERS, RunScale, scaled_verdict
from rlvr.runs import Run

DISCO_MODEL = "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B"
METHODS = {"grpo": "grpo", "disco_logl": "disco"}


def scale(model="smollm2", sets=("arithmetic",), steps=10, questions=4) -> RunScale:
    return RunScale(model, sets, {m: steps for m in METHODS}, {m: questions for m in METHODS})


@pytest.mark.parametrize("run, at", [
    (scale(), False),  # another model and task
    (scale(DISCO_MODEL, ("deepscaler",), 1400, 128), True),  # the paper's run
    (scale(DISCO_MODEL, ("deepscaler",), 100, 128), True),  # a tenth of its 1,000 steps: still its scale
    (scale(DISCO_MODEL, ("deepscaler",), 99, 128), False),  # fewer: not
    (scale(DISCO_MODEL, ("arithmetic",), 1400, 128), False),  # its model on another task
])
def test_a_run_is_at_the_papers_scale_with_its_model_data_and_steps(run, at):
    assert run.at(PAPERS["DisCO"], "disco_logl") is at


@pytest.mark.parametrize("said, far, near", [
    ("supported (one seed)", "reproduced at this scale (one seed)", "supported (one seed)"),
    ("contradicted", "not reproduced at this scale", "contradicted"),
    ("inconclusive", "inconclusive", "inconclusive"),
    ("inconclusive (too few points)", "inconclusive (too few points)", "inconclusive (too few points)"),
])
def test_the_words_of_a_verdict(said, far, near):
    assert scaled_verdict(said, at_scale=False) == far and scaled_verdict(said, at_scale=True) == near


def planted(tmp_path, repo, run_scale: RunScale) -> str:
    """disco_logl wrong on every problem where grpo is right: its claim to beat grpo fails."""
    runs = [Run("base"), Run("grpo", 0), Run("disco_logl", 0)]
    write_eval(tmp_path, runs[0], {"a": 1, "b": 1, "c": 1})
    write_eval(tmp_path, runs[1], {"a": 2, "b": 2, "c": 2})
    write_eval(tmp_path, runs[2], {"a": 0, "b": 0, "c": 0})
    for run in runs[1:]:
        write_steps(tmp_path, run, [0.1, 0.2, 0.3, 0.4])
    build_report(runs, tmp_path, tmp_path / "reports", repo / "data/vendor/paper_results.yaml", None, METHODS,
                 scale=run_scale)
    return (tmp_path / "reports/results.md").read_text()


def claim_row(md: str) -> str:
    return next(line for line in md.splitlines() if line.startswith("| disco_logl above grpo on accuracy"))


def test_far_from_the_papers_scale_a_failed_claim_is_not_reproduced_here(tmp_path, repo):
    md = planted(tmp_path, repo, scale())
    assert "| not reproduced at this scale (one seed) |" in claim_row(md)
    assert "contradicted" not in md.split("## Contents")[0]  # neither in the summary nor in the claims table
    section = md.split("## The papers' claims, checked on this run's data")[1]
    assert "| this run | smollm2 | arithmetic | 10 | 4 | 40 per seed |" in section
    assert "| DisCO | " + ", ".join(PAPERS["DisCO"].models) in section
    assert "far from DisCO's scale" in section


def test_at_the_papers_scale_the_same_data_contradict_the_claim(tmp_path, repo):
    md = planted(tmp_path, repo, scale(DISCO_MODEL, ("deepscaler",), 1400, 128))
    assert "| contradicted (one seed) |" in claim_row(md)
    assert "trains at the papers' scale" in md
