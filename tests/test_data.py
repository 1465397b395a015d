import json
import random

import pytest

from rlvr.data import arithmetic, sources
from rlvr.config import PromptParams
from rlvr.data.prompts import build_prompt
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


def test_a_larger_test_split_keeps_the_training_questions():
    """Train draws from its own stream: growing the test split only removes the
    newly held-out problems from it (levels 2-5 have thousands of problems;
    level 1, one-digit addition, has 100, so it loses more)."""
    small, _ = arithmetic.generate([2, 3, 4, 5], 400, 20, seed=1234)
    large, _ = arithmetic.generate([2, 3, 4, 5], 400, 60, seed=1234)
    shared = {r.problem for r in small} & {r.problem for r in large}
    assert len(shared) >= 0.95 * len({r.problem for r in small})


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
    default = PromptParams()
    p = build_prompt("Compute 2 + 3.", tok, default)
    assert "<|im_start|>user\nCompute 2 + 3.\nPlease reason step by step" in p and "\\boxed{}" in p
    assert p.endswith("<|im_start|>assistant\n")
    assert build_prompt("Compute 2 + 3.").startswith("Question: Compute 2 + 3.")


def test_prompt_template_is_a_param(base_model):
    """DeepScaleR's instruction after the problem (DisCO), and a system turn (SIREN's Qwen-math prompt)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base_model)
    disco = PromptParams(user="{problem} Let's think step by step and output the final answer within \\boxed{}.")
    p = build_prompt("What is $1+1$?", tok, disco)
    assert "What is $1+1$? Let's think step by step and output the final answer within \\boxed{}." in p
    siren = PromptParams(user="{problem}", system="Please reason step by step, and put your final answer "
                         "within \\boxed{}.")
    p = build_prompt("What is $1+1$?", tok, siren)
    assert p.index("<|im_start|>system\nPlease reason") < p.index("<|im_start|>user\nWhat is $1+1$?<|im_end|>")
    plain = build_prompt("Q?", None, PromptParams(user="{problem} A:", chat_template=False))
    assert plain == "Question: Q? A:\nAnswer:"


def test_prompt_template_errors():
    from rlvr.params import parse_params

    with pytest.raises(Exception, match="prompt.user' must contain {problem} exactly once"):
        parse_params({"prompt": {"user": "no placeholder"}})


def test_interval_answers_stay_whole_and_null_answers_are_skipped():
    assert sources.split_answer("[-2,4]") == ("[-2,4]", ())
    assert sources.split_answer("['9.6\\n', '9']") == ("9.6", ("9",))
    with pytest.warns(UserWarning, match="skipped 1 row"):
        recs = sources.normalize([{"problem": "p", "answer": "None"}, {"problem": "q", "answer": "3"}], "x")
    assert [r.answer for r in recs] == ["3"]


def hub_rows_dapo():
    wrap = lambda q: sources.DAPO_PREFIX + q + sources.DAPO_SUFFIX  # noqa: E731
    return [{"data_source": "math_dapo", "prompt": [{"role": "user", "content": wrap(q)}], "ability": "MATH",
             "reward_model": {"ground_truth": a, "style": "rule"}, "extra_info": {"index": str(i)}}
            for i, (q, a) in enumerate([("What is $2+2$?", "4"), ("What is $3 \\cdot 3$?", "9"),
                                        ("What is $2+2$?", "4")])]


def test_dapo_math_loader_through_a_hub_mirror(tmp_path):
    """The online loader itself (datasets.load_dataset) on local rows in the hub's format."""
    mirror = tmp_path / "mirror"
    write_jsonl(mirror / "BytedTsinghua-SIA/DAPO-Math-17k/train.jsonl", hub_rows_dapo())
    recs = sources.load_hub("dapo_math", mirror)
    # the DAPO instruction is taken off, the ground truth read from reward_model, repeats dropped
    assert [(r.problem, r.answer) for r in recs] == [("What is $2+2$?", "4"), ("What is $3 \\cdot 3$?", "9")]


def test_openr1_loader_takes_the_user_turn(tmp_path):
    mirror = tmp_path / "mirror"
    rows = [{"prompt": [{"role": "system", "content": "Your task is to follow a systematic process"},
                        {"role": "user", "content": "Find $x$ if $x+1=3$."}],
             "target": "...", "reward_model": {"ground_truth": "2", "style": "rule"}}]
    write_jsonl(mirror / "Elliott/Openr1-Math-46k-8192/train.jsonl", rows)
    recs = sources.load_hub("openr1_math", mirror)
    assert [(r.problem, r.answer) for r in recs] == [("Find $x$ if $x+1=3$.", "2")]


def test_missing_mirror_file_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="Elliott/Openr1-Math-46k-8192's train split"):
        sources.load_hub("openr1_math", tmp_path)


def test_validation_is_held_out_of_the_training_mixture():
    from rlvr.data.prepare import hold_out

    mixture = [Record(id=f"q{i}", problem=f"p{i}", answer=str(i), source="t") for i in range(40)]
    train, val = hold_out(mixture, 8)
    assert len(val) == 8 and len(train) == 32 and not {r.id for r in train} & {r.id for r in val}
    assert [r.id for r in train] == [r.id for r in mixture if r not in val]  # the rest keep their order
    assert hold_out(mixture, 8) == (train, val)  # a fixed draw: every run validates on the same problems
    assert hold_out(mixture, 0) == (mixture, [])
    with pytest.raises(ValueError, match="over half of the training mixture"):
        hold_out(mixture, 21)
