"""The published numbers beside ours: each recipe's own model, and the profile named."""

import pytest
import yaml
from helpers import REPO
from report_helpers import RUNS

from rlvr.report import build_report


@pytest.mark.parametrize("recipe", sorted((REPO / "params").glob("*.yaml")),
                         ids=lambda p: p.stem)
def test_each_recipe_reports_its_own_models_published_numbers(recipe, repo):
    """A recipe's paper_profile is its model's entry: its own figures, and the list of what is not published."""
    from rlvr.report.published import paper_notes

    params = yaml.safe_load(recipe.read_text())
    paper = yaml.safe_load((repo / "data/vendor/paper_results.yaml").read_text())
    entry = paper[params["report"]["paper_profile"]]
    assert entry["base_model"] == params["model"]["source"]
    methods = ["base", *params["methods"]]
    notes = paper_notes(paper, params["report"]["paper_profile"], methods)
    for key, value in (entry.get("headline") or {}).items():
        assert f"- {key}: {value}" in notes
    others = {v for name, e in paper.items() if isinstance(e, dict) and name != params["report"]["paper_profile"]
              for v in (e.get("headline") or {}).values()} - set((entry.get("headline") or {}).values())
    assert not any(f": {v}\n" in notes + "\n" for v in others)  # no other model's figures
    unpublished = [m for m in methods if m not in {r["method"] for r in entry.get("rows", [])}]
    assert ("no published row for " + ", ".join(unpublished) in notes) == bool(unpublished)
    if "siren" in recipe.stem and "dr_grpo" in params["methods"]:
        assert "no published row for base, siren, dr_grpo" in notes and "Not available:" in notes


def test_an_unknown_paper_profile_names_the_valid_ones(tmp_path, repo):
    with pytest.raises(ValueError, match="did you mean 'siren_qwen2.5_math_7b'.*valid: 1.5b, 7b"):
        build_report(RUNS, tmp_path, tmp_path / "reports", repo / "data/vendor/paper_results.yaml",
                     "siren_qwen2.5_math_7", {})

