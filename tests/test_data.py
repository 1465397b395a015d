import json
import random

import pytest

from rlvr.data import arithmetic, sources
from rlvr.data.prompts import INSTRUCTION, build_prompt
from rlvr.data.records import EmptyDatasetError, Record, read_records, write_jsonl


def test_generator_is_deterministic():
    a = arithmetic.generate([1, 2, 3, 4, 5, 6], 60, 5, seed=7)
    b = arithmetic.generate([1, 2, 3, 4, 5, 6], 60, 5, seed=7)
    c = arithmetic.generate([1, 2, 3, 4, 5, 6], 60, 5, seed=8)
    assert a == b
    assert a != c


@pytest.mark.parametrize("level", arithmetic.LEVELS)
def test_gold_answers_match_an_independent_evaluation(level):
    rng = random.Random(level)
    for _ in range(200):
        text, value = arithmetic.make_problem(level, rng)
        assert set(text) <= set("0123456789+-*() ")
        assert eval(text) == value, text  # Python's own parser and precedence  # noqa: S307


def test_levels_grow_in_steps():
    rng = random.Random(0)
    ops = {lv: arithmetic.make_problem(lv, rng)[0].count(" ") // 2 for lv in arithmetic.LEVELS}
    assert ops[1] == 1 and ops[4] == 2 and ops[5] == 3 and ops[6] == 4


def test_held_out_split_is_disjoint_and_balanced():
    train, test = arithmetic.generate([1, 2, 3], 300, 10, seed=0)
    assert len(test) == 30 and len(train) == 300
    assert not {r.problem for r in train} & {r.problem for r in test}
    assert sorted({r.level for r in train}) == [1, 2, 3]
    assert all(r.source == "arithmetic" for r in train + test)


def test_unknown_level_is_an_error():
    with pytest.raises(ValueError, match="unknown level 9"):
        arithmetic.generate([1, 9], 10, 2, seed=0)


@pytest.mark.parametrize(
    "raw,expected",
    [
        ("142.0", ("142", ())),
        ("['9.6\\n']", ("9.6", ())),
        ("['6630.65\\n', '6630\\n']", ("6630.65", ("6630",))),
        ("['$2^{1009}$']", ("2^{1009}", ())),
        ("['$221$,$8$']", ("221,8", ())),
        ("\\frac{14}{3}", ("\\frac{14}{3}", ())),
    ],
)
def test_split_answer(raw, expected):
    assert sources.split_answer(raw) == expected


@pytest.mark.parametrize("name", sources.BENCHMARKS + sources.OFFLINE_TRAIN_SETS)
def test_vendored_sets_normalize(repo, name):
    recs = sources.load_vendored(name, repo / "data" / "vendor")
    assert len(recs) >= 30
    assert all(r.problem and r.answer and r.source == name for r in recs)
    assert len({r.id for r in recs}) == len(recs)


def test_math500_levels(repo):
    recs = sources.load_vendored("math500", repo / "data" / "vendor")
    assert {r.level for r in recs} == {1, 2, 3, 4, 5}


def test_online_path_offline_names_the_vendored_alternative(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(sources.OfflineError, match="data.source: offline"):
        sources.load("math500", "online", "data/vendor")
    with pytest.raises(sources.OfflineError, match="math_train"):
        sources.load_hub("deepscaler")


def test_records_skip_bad_rows_and_count_them(tmp_path):
    path = tmp_path / "x.jsonl"
    good = Record("a", "1+1?", "2", "t").to_json()
    lines = [json.dumps(good), "{not json", json.dumps({**good, "answer": ""}), json.dumps(good),
             json.dumps({**good, "id": "b", "problem": None})]
    path.write_bytes(("\n".join(lines) + "\n").encode() + b"\xff\xfe\n")
    with pytest.warns(UserWarning) as w:
        recs = read_records(path)
    assert [r.id for r in recs] == ["a"]
    text = " ".join(str(x.message) for x in w)
    assert "x.jsonl" in text and "2 malformed" in text and "3 row(s)" in text


def test_empty_dataset_is_an_error(tmp_path):
    path = tmp_path / "empty.jsonl"
    write_jsonl(path, [])
    with pytest.raises(EmptyDatasetError, match="no usable records"):
        read_records(path)


def test_prompt_uses_chat_template_and_instruction(base_model):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base_model)
    p = build_prompt("Compute 2 + 3.", tok)
    assert "<|im_start|>user\nCompute 2 + 3." in p and INSTRUCTION in p
    assert p.endswith("<|im_start|>assistant\n")
    assert build_prompt("Compute 2 + 3.").startswith("Question: Compute 2 + 3.")
