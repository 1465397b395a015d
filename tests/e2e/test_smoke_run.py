"""python -m rlvr.smoke on the CPU: a recipe's real path for two steps, with a verdict per check."""

import subprocess
import sys

from helpers import REPO, clean_env


def test_the_smoke_passes_every_check_of_a_recipe_on_cpu(tmp_path, base_model):
    out = subprocess.run([sys.executable, "-m", "rlvr.smoke", "params/disco_1.5b.yaml", "--tokenizer", str(base_model),
                          "--work", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=900,
                         env=clean_env())
    lines = [line for line in out.stdout.splitlines() if line[:4] in ("PASS", "FAIL", "INFO")]
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    verdicts = {line.split()[1]: line.split()[0] for line in lines}
    assert {k: v for k, v in verdicts.items() if v != "INFO"} == {
        "engine": "PASS", "grader": "PASS", "stop": "PASS", "push": "PASS", "resume": "PASS", "rewards": "PASS",
        "validation": "PASS"}
    assert "smoke: all checks passed" in out.stdout
