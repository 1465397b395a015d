import json
import random
from pathlib import Path

import pytest

from rlvr.data import arithmetic, sources
from rlvr.data.prompts import build_prompt
from rlvr.data.records import DataError, EmptyDatasetError, Record, first_problems, read_records, write_jsonl
from rlvr.settings.prompt import PromptParams
from rlvr.settings.datasets import BENCHMARKS, DAPO_PREFIX, DAPO_SUFFIX, OFFLINE_TRAIN_SETS, DataParams, DatasetEntry


def test_generator_is_deterministic():
    a = arithmetic.generate([1, 2, 3, 4, 5, 6, 7], 60, 5, seed=7)
    b = arithmetic.generate([1, 2, 3, 4, 5, 6, 7], 60, 5, seed=7)
    c = arithmetic.generate([1, 2, 3, 4, 5, 6, 7], 60, 5, seed=8)
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
    assert ops[1] == ops[2] == ops[3] == ops[4] == 1 and ops[5] == 2 and ops[6] == 3 and ops[7] == 4


@pytest.mark.parametrize("level, space", [(1, 100), (2, 100), (4, 720)])
def test_small_levels_list_their_distinct_problems(level, space):
    rng = random.Random(level)
    assert len({arithmetic.make_problem(level, rng)[0] for _ in range(40 * space)}) == arithmetic.SPACE[level] == space


def test_three_splits_are_disjoint_and_small_levels_keep_training_problems():
    """Levels 1 and 2 have 100 problems each: the test split takes at most half
    (50 of the 100 asked), validation at most a quarter (25), training the rest."""
    s = arithmetic.splits([1, 2, 3, 4], 400, 100, seed=3, n_validation_per_level=40)
    test, val, train = ({r.problem for r in part} for part in (s.test, s.validation, s.train))
    assert not test & val and not test & train and not val & train
    per_level = lambda part, lv: sum(r.level == lv for r in part)  # noqa: E731
    assert [per_level(s.test, lv) for lv in (1, 2, 3, 4)] == [50, 50, 100, 100]
    assert [per_level(s.validation, lv) for lv in (1, 2, 3, 4)] == [25, 25, 40, 40]
    assert len(s.test) == len(test) and len(s.validation) == len(val)  # distinct within each held-out split
    assert {per_level(s.train, lv) for lv in (1, 2, 3, 4)} == {100}  # round-robin
    assert len({r.problem for r in s.train if r.level == 1}) <= 25  # level 1's training problems repeat
    assert arithmetic.splits([1, 2, 3, 4], 400, 100, seed=3, n_validation_per_level=40) == s
    assert s.test == arithmetic.generate([1, 2, 3, 4], 400, 100, seed=3)[1]  # a validation split leaves the test as it was


def test_held_out_split_is_disjoint_and_balanced():
    train, test = arithmetic.generate([1, 2, 3], 300, 10, seed=0)
    assert len(test) == 30 and len(train) == 300
    assert not {r.problem for r in train} & {r.problem for r in test}
    assert sorted({r.level for r in train}) == [1, 2, 3]
    assert all(r.source == "arithmetic" for r in train + test)


def test_a_larger_test_split_keeps_the_training_questions():
    """Train draws from its own stream: growing the test split only removes the
    newly held-out problems from it (levels 3-6 have hundreds to millions of problems;
    levels 1 and 2 have 100 each, so they lose more)."""
    small, _ = arithmetic.generate([3, 4, 5, 6], 400, 20, seed=1234)
    large, _ = arithmetic.generate([3, 4, 5, 6], 400, 60, seed=1234)
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


@pytest.mark.parametrize("name", BENCHMARKS + OFFLINE_TRAIN_SETS)
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
        sources.load_set("math500", DataParams(source="online", vendor_dir="data/vendor"))
    with pytest.raises(sources.OfflineError, match="math_train"):
        sources.load_hub("deepscaler")


def test_a_prepared_file_with_a_bad_line_is_an_error_naming_the_line(tmp_path):
    path = tmp_path / "x.jsonl"
    good = Record("a", "1+1?", "2", "t").to_json()
    for bad, why in (("{not json", "not valid JSON"), (json.dumps({**good, "id": "b", "answer": ""}), "non-empty"),
                     (json.dumps(good), "appears twice"), ("[1, 2]", "not an object")):
        path.write_text(json.dumps(good) + "\n\n" + bad + "\n")  # a blank line between: line numbers count it
        with pytest.raises(DataError, match=f"x.jsonl:3: .*{why}"):
            read_records(path)
    path.write_bytes(json.dumps(good).encode() + b"\n\xff\xfe\n")
    with pytest.raises(DataError, match="x.jsonl:2: not valid JSON"):
        read_records(path)


def _vendor(tmp_path, lines: list[str]) -> Path:
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "math500.jsonl").write_text("\n".join(lines) + "\n")
    return tmp_path


def test_a_bad_benchmark_row_stops_the_data_stage_unless_skipping_is_asked(tmp_path):
    rows = [json.dumps({"id": f"math500-{i}", "problem": f"{i}+1?", "answer": str(i + 1)}) for i in range(6)]
    rows[2] = rows[2][:-3]  # a line cut short: not JSON
    rows[4] = json.dumps({"id": "math500-4", "problem": "4+1?", "answer": ""})
    vendor = _vendor(tmp_path, rows)
    with pytest.raises(DataError, match="math500.jsonl:3: not valid JSON.*data.skip_bad_rows: true"):
        sources.load_vendored("math500", vendor)
    skipped = []
    with pytest.warns(UserWarning, match="rows 5"):  # the row's own line, counted after the bad line before it
        recs = sources.load_vendored("math500", vendor, skip_bad=True, skipped=skipped)
    assert skipped == [3, 5]
    assert [r.id for r in recs] == ["math500-0", "math500-1", "math500-3", "math500-5"]
    # a slice is chosen by id: the first 4 problems are ids 0-3, whatever rows were lost before them
    assert [r.id for r in first_problems(recs, 4)] == ["math500-0", "math500-1", "math500-3"]


def test_rows_without_an_id_take_their_line_so_a_lost_line_renames_nothing(tmp_path):
    rows = [json.dumps({"problem": f"{i}+1?", "answer": str(i + 1)}) for i in range(4)]
    rows[1] = "{"
    recs = sources.load_vendored("math500", _vendor(tmp_path, rows), skip_bad=True)
    assert [r.id for r in recs] == ["math500-0", "math500-2", "math500-3"]


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
    from rlvr.settings.load import parse_params

    with pytest.raises(Exception, match="prompt.user' must contain {problem} exactly once"):
        parse_params({"prompt": {"user": "no placeholder"}})


def test_interval_answers_stay_whole_and_null_answers_are_skipped():
    assert sources.split_answer("[-2,4]") == ("[-2,4]", ())
    assert sources.split_answer("['9.6\\n', '9']") == ("9.6", ("9",))
    with pytest.warns(UserWarning, match="skipped 1 row"):
        recs = sources.normalize([{"problem": "p", "answer": "None"}, {"problem": "q", "answer": "3"}],
                                 DatasetEntry("x", path="data/own/x.jsonl"))
    assert [r.answer for r in recs] == ["3"]


def hub_rows_dapo():
    wrap = lambda q: DAPO_PREFIX + q + DAPO_SUFFIX  # noqa: E731
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
