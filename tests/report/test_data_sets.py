"""The report's Data section: each set's source and rows, and shared problems counted."""

from rlvr.report.data_sets import data_section, sets_of


def test_each_set_is_a_row_and_shared_problems_are_named():
    sets = {"train/mine": {"role": "train", "source": "data/own/mine.jsonl", "rows": 1200, "skipped": 3,
                           "shared": {"math500": 2}},
            "train/arithmetic": {"role": "train", "source": "generated", "rows": 20, "skipped": 0, "shared": {}},
            "eval/math500": {"role": "eval", "source": "data/vendor/benchmarks/math500.jsonl", "rows": 500,
                             "skipped": 0}}
    md = data_section(sets)
    assert "| mine | training | data/own/mine.jsonl | 1,200 | 3 | math500 2 |" in md
    assert "| arithmetic | training | generated | 20 | 0 | none |" in md
    assert "| math500 | evaluation | data/vendor/benchmarks/math500.jsonl | 500 | 0 |  |" in md
    assert "**1 training set(s) share problems with an evaluation set**" in md


def test_no_note_without_shared_problems_and_no_section_without_sets():
    sets = {"train/a": {"role": "train", "source": "s", "rows": 1, "skipped": 0, "shared": {}}}
    assert "share problems" not in data_section(sets)

    class Results:
        metrics = [{"k": 2}]

    assert sets_of({"grpo": Results()}) is None
