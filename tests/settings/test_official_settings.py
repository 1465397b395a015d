"""docs/recipes.md's "same" read mechanically: each recipe setting whose
official value data/vendor/official_settings.yaml records equals it, or says
why not; and a docs row marked "same" never holds a setting that differs."""

import re

import pytest
import yaml
from helpers import REPO

from rlvr.settings.load import load_params

OFFICIAL = yaml.safe_load((REPO / "data/vendor/official_settings.yaml").read_text())
DOCS = (REPO / "docs/recipes.md").read_text()


def docs_rows(section: str) -> dict[str, list[str]]:
    """A section's table rows of docs/recipes.md: first cell -> every row's other cells."""
    body = DOCS.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, list[str]] = {}
    for line in body.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if len(cells) >= 3 and not set(cells[0]) <= {"-"} and cells[0] != "setting":
            rows.setdefault(cells[0], []).append(cells[2])
    return rows


def setting(params, path: str):
    """A recipe's effective value of a dotted setting (methods.<m>.<key>: the method's own)."""
    head, _, rest = path.partition(".")
    if head == "methods":
        name, key = rest.split(".", 1)
        entry = params.methods[name]
        return entry.settings[key] if key in entry.settings else getattr(entry.train, key)
    value = params
    for part in path.split("."):
        value = getattr(value, part)
    return value


CASES = [(group, recipe, row) for group, spec in OFFICIAL.items() for row in spec["rows"]
         for recipe in row.get("recipes", spec["recipes"])]


@pytest.mark.parametrize("group, recipe, row", CASES, ids=lambda x: x if isinstance(x, str) else x["row"])
def test_a_setting_equals_the_official_value_or_says_why_and_the_docs_agree(group, recipe, row):
    params = load_params(REPO / "params" / f"{recipe}.yaml")
    differing = []
    for path, official in row["settings"].items():
        official = official.get(recipe) if isinstance(official, dict) and recipe in official else official
        ours = setting(params, path)
        if not (ours == official or (isinstance(ours, float) and official is not None
                                     and ours == pytest.approx(official))):
            differing.append(f"{path}: ours {ours!r}, official {official!r}")
    assert bool(differing) == bool(row.get("differs")), (
        f"{recipe}, row '{row['row']}': " + ("; ".join(differing) + " (no `differs:` reason)" if differing
                                             else "equal to the official values, yet marked `differs`"))
    cells = docs_rows(OFFICIAL[group]["section"]).get(row["row"])
    assert cells, f"docs/recipes.md has no row '{row['row']}' in '{OFFICIAL[group]['section']}'"
    if differing:
        assert not any(c == "same" or c.startswith("same ") for c in cells), (
            f"docs/recipes.md marks '{row['row']}' same, but {recipe} differs: {'; '.join(differing)}")


def test_the_check_catches_a_planted_difference(monkeypatch):
    """A recipe value moved off the official one fails the check above."""
    row = next(r for r in OFFICIAL["siren"]["rows"] if r["row"] == "entropy term")
    planted = {**row, "settings": {**row["settings"], "methods.siren.entropy_coef": 0.05}}
    with pytest.raises(AssertionError, match="entropy_coef: ours 0.005, official 0.05"):
        test_a_setting_equals_the_official_value_or_says_why_and_the_docs_agree("siren", "siren_qwen2.5-math-7b",
                                                                                 planted)
    with pytest.raises(AssertionError, match="marks 'entropy term' same"):
        test_a_setting_equals_the_official_value_or_says_why_and_the_docs_agree(
            "siren", "siren_qwen2.5-math-7b", {**planted, "differs": "planted"})
