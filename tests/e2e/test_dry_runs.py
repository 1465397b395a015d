"""rlvr dryrun: each recipe's whole path on the CPU, with a tiny model of its architecture
(the recipes it leaves out run the objectives, prompt and grader of a twin: tests/settings/test_recipes.py)."""

import json
import math
import subprocess
import sys

import pytest
import yaml
from helpers import DRY_RUNS, REPO


@pytest.mark.parametrize("recipe", DRY_RUNS, ids=lambda p: p.stem)
def test_cpu_dry_run(recipe, base_model, tmp_path):
    """One method of each objective (the recipe's last: DisCO's L-ratio); the
    others differ only in objective settings, whose every path in the loss
    tests/settings/test_recipes.py checks."""
    from rlvr.settings.load import load_params
    from rlvr.tools.dryrun import architecture

    raw = yaml.safe_load(recipe.read_text())
    picked = list({m.objective: name for name, m in load_params(recipe).methods.items()}.values())
    out = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "rlvr.tools.dryrun", str(recipe), "--tokenizer", str(base_model),
                           "--work", str(tmp_path), "--vendor", str(REPO / "data/vendor"), "--report", str(out),
                           *[f"--method={name}" for name in picked]], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["architecture"] == architecture(raw["model"]["source"])
    assert report["architecture"] == ("llama" if recipe.stem in ("disco_8b", "siren_llama3.1-8b") else "qwen2")
    assert set(report["methods"]) == set(picked)
    assert len(picked) == len({m["objective"] for m in raw["methods"].values()})
    t = raw["train"]
    for name, got in report["methods"].items():
        assert got["steps"] == [1, 2] and got["snapshots"][-1] == 2, name  # validated at both, the final listed
        assert got["evaluated_steps"] == got["snapshots"] and got["validation_k"] == raw["validation"]["k"], name
        assert got["zero_stage"] == t["zero_stage"] and got["bf16"] == t["bf16"], name
        assert got["gradient_checkpointing"] == t["gradient_checkpointing"], name
        assert got["weight_decay"] == pytest.approx(t["weight_decay"]), name
        warm = t["warmup_steps"]
        assert got["lr"] == pytest.approx([t["lr"] * min(1.0, s / warm) if warm else t["lr"] for s in (0, 1)]), name
        assert set(got["k_per_set"]) >= {"arithmetic", *raw["data"]["benchmarks"]}
        assert all(math.isfinite(v) for v in got["loss"]), name  # neither NaN nor infinite
    assert report["rows"]["train"] >= 2 and all(report["rows"][b] >= 2 for b in raw["data"]["benchmarks"])
    assert set(report["checkpoints"]) == set(raw.get("checkpoints") or {})  # each released model's row evaluated
    for got in report["checkpoints"].values():
        assert set(got["k_per_set"]) >= {"arithmetic", *raw["data"]["benchmarks"]}
    # the report's tables a GPU user reads, fed from the dry run's outputs: each claim row names its source
    assert "| claim | statistic | estimate [95% interval] | published | verdict | where the paper states it |" \
        in report["claims"]
    assert "best step (validation)" in report["checkpoint_selection"]
