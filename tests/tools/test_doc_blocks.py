"""The numbers the README and docs show from the code and reports/ are what
those sources give now (rlvr.tools.doc_blocks; `rlvr doc-blocks` rewrites them)."""

import pytest
from helpers import REPO

from rlvr.tools import doc_blocks


@pytest.mark.parametrize("name", doc_blocks.FILES)
def test_every_generated_block_is_current(name):
    found = doc_blocks.blocks((REPO / name).read_text())
    assert found, f"{name} has no generated block"
    for block, now, source in found:
        assert now == source, f"{name}: block {block} is stale; run rlvr doc-blocks"


def test_every_generator_is_used_and_a_stale_block_is_seen():
    used = {block for name in doc_blocks.FILES for block, _, _ in doc_blocks.blocks((REPO / name).read_text())}
    assert used == set(doc_blocks.GENERATORS)
    stale = "x <!-- generated: precision_findings -->bf16 is faster<!-- end generated --> y"
    [(_, now, source)] = doc_blocks.blocks(stale)
    assert now != source
    assert doc_blocks.rewrite(stale) == f"x <!-- generated: precision_findings -->{source}<!-- end generated --> y"


def _exp_show_command() -> list[str]:
    import re
    import shlex

    line = next(l for l in (REPO / "README.md").read_text().splitlines() if l.startswith("dvc exp show"))
    return shlex.split(re.sub(r"\s+#.*$", "", line))


def test_the_readmes_exp_show_drops_every_hash_column():
    """DVC keeps a column unless its name *starts* with a --drop pattern
    (dvc/commands/experiments/show.py: drop_re.match): `/` alone dropped nothing."""
    import re

    cmd = _exp_show_command()
    drop = re.compile(cmd[cmd.index("--drop") + 1])
    for hashed in ("data/prepared/train", "models/base", "src/rlvr/training/trainer.py", "stages/train.py"):
        assert drop.match(hashed), hashed
    for kept in ("avg@2.grpo", "avg@2.disco_logl", "train.lr", "methods.disco_logl.tau"):
        assert not drop.match(kept), kept


@pytest.mark.slow  # runs dvc exp show
def test_the_readmes_exp_show_fits_120_columns():
    import os
    import subprocess
    import sys

    cmd = _exp_show_command()
    out = subprocess.run([sys.executable, "-m", "dvc", *cmd[1:], "--no-pager"], cwd=REPO, capture_output=True,
                         text=True, env={**os.environ, "COLUMNS": "120"}, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert "Experiment" in out.stdout and max(len(l) for l in lines) <= 120, out.stdout
    header = next(l for l in lines if "Experiment" in l)
    assert "/" not in header and "maj@" not in header, header
