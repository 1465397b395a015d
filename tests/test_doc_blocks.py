"""The numbers the README and docs show from the code and reports/ are what
those sources give now (rlvr.doc_blocks; `python -m rlvr.doc_blocks` rewrites them)."""

import pytest

from conftest import REPO
from rlvr import doc_blocks


@pytest.mark.parametrize("name", doc_blocks.FILES)
def test_every_generated_block_is_current(name):
    found = doc_blocks.blocks((REPO / name).read_text())
    assert found, f"{name} has no generated block"
    for block, now, source in found:
        assert now == source, f"{name}: block {block} is stale; run python -m rlvr.doc_blocks"


def test_every_generator_is_used_and_a_stale_block_is_seen():
    used = {block for name in doc_blocks.FILES for block, _, _ in doc_blocks.blocks((REPO / name).read_text())}
    assert used == set(doc_blocks.GENERATORS)
    stale = "x <!-- generated: grpo_seeds -->0.1, 0.2 and 0.3<!-- end generated --> y"
    [(_, now, source)] = doc_blocks.blocks(stale)
    assert now != source and doc_blocks.rewrite(stale) == f"x <!-- generated: grpo_seeds -->{source}<!-- end generated --> y"
