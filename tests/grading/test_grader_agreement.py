"""The grader comparison: synthetic endings of known kinds, the 2 x 2 counts
through the real grading pools, and the report's appendix."""

import json
from collections import Counter
from fractions import Fraction

from helpers import REPO

from rlvr.data.records import Record, write_jsonl
from rlvr.grading.agreement import KINDS, THINK, compare, run_samples, synthetic_endings
from rlvr.report.tables import agreement_section


def test_synthetic_endings_cover_every_kind_from_the_benchmarks_golds():
    rows = synthetic_endings(REPO / "data" / "vendor")
    counts = Counter(r["kind"] for r in rows)
    assert set(counts) == set(KINDS) and all(0 < n <= 50 for n in counts.values())
    assert all(THINK in r["response"] for r in rows)
    for r in rows:
        final = r["response"].split(THINK)[1]
        if r["kind"] == "several_boxes":
            assert final.count("\\boxed") >= 2
        if r["kind"] == "no_box":
            assert "\\boxed" not in final and r["golds"][0] in final
        if r["kind"] == "decimal":  # the exact decimal of the fraction gold
            num, den = (int(x) for x in r["golds"][0].split("frac{")[1].rstrip("}").split("}{"))
            decimal = final.split("\\boxed{")[1].split("}")[0]
            assert Fraction(decimal) == Fraction(num, den) * (-1 if r["golds"][0].startswith("-") else 1)
        if r["kind"] == "gold_only_in_thinking":
            assert f"\\boxed{{{r['golds'][0]}}}" in r["response"].split(THINK)[0]


def test_compare_counts_each_pair_of_verdicts():
    rows = [{"kind": "one_box", "golds": ["4"], "response": f"<think>x{THINK} so $\\boxed{{4}}$."},
            {"kind": "no_box", "golds": ["116"], "response": f"<think>x{THINK} The answer is $116$."},
            {"kind": "decimal", "golds": ["\\frac{1}{4}"], "response": f"<think>x{THINK} $\\boxed{{0.25}}$"},
            {"kind": "gold_only_in_thinking", "golds": ["3"],
             "response": f"<think>$\\boxed{{3}}$?{THINK} $\\boxed{{4}}$"}]
    res = compare(rows, THINK, workers=1)
    assert res["n"] == 4 and res["correct"]["math_verify"] == 3
    deepscaler = res["pairs"]["deepscaler"]
    # deepscaler: a box is needed; 0.25 against \frac{1}{4} is equal under sympy
    assert (deepscaler["both"], deepscaler["ours_only"], deepscaler["theirs_only"], deepscaler["neither"]) == (2, 1, 0, 1)
    assert [e["kind"] for e in deepscaler["examples"]] == ["no_box"]
    assert res["by_kind"]["gold_only_in_thinking"] == {"n": 1, "math_verify": 0, "deepscaler": 0, "siren_official": 0}
    md = agreement_section({"run_samples": res, "answer_after": None})
    assert "| this run's samples (4) | deepscaler | 3 / 2 | 2 | 1 | 0 | 1 | 75.0% |" in md
    assert "deepscaler, no_box: gold `116`; ours correct, deepscaler wrong" in md


def test_run_samples_take_every_gold_of_the_problem(tmp_path):
    write_jsonl(tmp_path / "eval" / "minerva.jsonl",
                [Record(id="m1", problem="p", answer="6630.65", source="minerva", alt_answers=("6630",))])
    samples = tmp_path / "reports" / "eval" / "grpo" / "seed0" / "samples.jsonl"
    samples.parent.mkdir(parents=True)
    samples.write_text(json.dumps({"benchmark": "minerva", "id": "m1", "gold": "6630.65", "response": "\\boxed{6630}"})
                       + "\n")
    assert run_samples(tmp_path / "reports" / "eval", tmp_path / "eval") == [
        {"golds": ["6630.65", "6630"], "response": "\\boxed{6630}", "benchmark": "minerva", "id": "m1",
         "question": "p", "form": "math"}]  # graded as the run graded it: its question and its task's answer form
