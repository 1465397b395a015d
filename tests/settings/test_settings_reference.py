"""docs/settings.md is written from the settings' dataclasses and their
comments (rlvr.settings.reference), and the params files use only its keys."""

import pytest
import yaml
from helpers import REPO

from rlvr.settings.reference import documented_keys, reference

PARAMS_FILES = [REPO / "params.yaml", *sorted((REPO / "params").glob("*.yaml"))]


def undocumented(raw: dict, keys: dict[str, set[str]]) -> list[str]:
    """The dotted keys of a params mapping that the reference does not list."""
    found = []

    def walk(section: str, mapping: dict):
        for key, value in mapping.items():
            where = f"{section}.{key}" if section else key
            if key not in keys.get(section, set()):
                found.append(where)
            elif isinstance(value, dict) and where in keys:
                walk(where, value)

    walk("", {k: v for k, v in raw.items() if k not in ("methods", "checkpoints")})
    for name, entry in (raw.get("methods") or {}).items():
        found += [f"methods.{name}.{k}" for k in entry or {} if k not in keys["methods.*"]]
    return found


def test_the_docs_are_the_generated_reference():
    assert (REPO / "docs" / "settings.md").read_text() == reference(), \
        "regenerate: rlvr settings > docs/settings.md"


@pytest.mark.parametrize("path", PARAMS_FILES, ids=lambda p: p.name)
def test_every_key_of_a_params_file_is_documented(path):
    assert undocumented(yaml.safe_load(path.read_text()), documented_keys()) == []


def test_an_undocumented_key_is_found():
    raw = {"train": {"lr": 1e-6, "lr_schedule": "cosine"}, "data": {"arithmetic": {"levels": [1], "digits": 3}},
           "methods": {"m": {"objective": "grpo", "clip_low": 0.2, "clip_lo": 0.2}}, "checkpoints": {"x": "y"}}
    assert undocumented(raw, documented_keys()) == ["train.lr_schedule", "data.arithmetic.digits",
                                                    "methods.m.clip_lo"]
    assert "| `ratio` | str | `'token'` |" in reference()  # a setting, its type and default, from the dataclass
