"""rlvr smoke on the CPU: a recipe's real path for two steps of each of its
objectives (here SIREN's recipe, narrowed to SIREN: its grader's two halves, its
dataset system prompt replaced on CPU, its anchor), one line per check on the
screen, the engines' and libraries' output in smoke.log. DisCO's recipes run
whole on the CPU in tests/e2e/test_dry_runs.py."""

import re
import subprocess
import sys

from helpers import REPO, clean_env


def test_the_smoke_passes_every_check_of_a_recipe_on_cpu(tmp_path, base_model):
    out = subprocess.run([sys.executable, "-m", "rlvr.tools.smoke", "params/siren_qwen2.5-math-7b.yaml", "--method", "siren",
                          "--tokenizer", str(base_model), "--work", str(tmp_path)], cwd=REPO, capture_output=True,
                         text=True, timeout=900, env=clean_env())
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    screen = out.stdout.splitlines()
    # the screen holds the checks and the verdict alone; everything else went to the log
    assert all(line[:4] in ("PASS", "FAIL", "INFO") or line.startswith(("smoke:", "-- ")) for line in screen), screen
    assert screen[0].startswith("smoke: siren (siren) on a tiny model") and "-- siren (siren)" in screen
    verdicts = {line.split()[1]: line.split()[0] for line in screen if line[:4] in ("PASS", "FAIL", "INFO")}
    assert {k: v for k, v in verdicts.items() if v != "INFO"} == {
        "engine": "PASS", "grader": "PASS", "stop": "PASS", "push": "PASS", "resume": "PASS", "rewards": "PASS",
        "validation": "PASS"}
    assert screen[-1] == "smoke: all checks passed"
    # rewards that are not all 0, so that step 1's real update moved the engine's log-probs
    rewards = next(line for line in screen if line.split()[1] == "rewards")
    assert re.search(r"reward mean per step \[([0-9.]+), ([0-9.]+)\]", rewards) and "[0.0, 0.0]" not in rewards
    push = next(line for line in screen if line.split()[1] == "push")
    moved = float(re.search(r"after step 1 \(which moved them ([0-9.]+)\)", push).group(1))
    # the engine's log-probs of one input repeat exactly (re-pushing the same weights moves them 0.0000),
    # so any move is step 1's update reaching the bf16 weights it serves
    assert re.search(r"undone: 0\.0000", push) and moved > 0, push
    log = (tmp_path / "siren_qwen2.5-math-7b" / "smoke.log").read_text()
    assert "vLLM" in log or "vllm" in log  # the engine's own output

