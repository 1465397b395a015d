"""Dataset entries: a researcher's own file or hub set named in params, read
by the one loader every registered set goes through, and checked before compute."""

import json
import re
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from rlvr.data import sources
from rlvr.data.checks import dataset_problems
from rlvr.data.prepare import prepare
from rlvr.data.records import DataError, problem_key, read_records, write_jsonl
from rlvr.grading.answer_forms import CHOICE
from rlvr.grading.graders import grade_with
from rlvr.schema import ConfigError
from rlvr.settings.datasets import BENCHMARKS, OFFLINE_TRAIN_SETS, REGISTERED, DataParams
from rlvr.settings.load import parse_params

REPO = Path(__file__).resolve().parents[2]
VENDOR = str(REPO / "data" / "vendor")
GSM_ROWS = [{"question": "Tom has 3 apples and buys 4. How many?", "answer": "He has 3 + 4 = 7.\n#### 7"},
            {"question": "A box holds 1,200 pens; 200 are sold. How many are left?", "answer": "1200-200\n#### 1,000"},
            {"question": "Tom has 3 apples and buys 4. How many?", "answer": "#### 7"}]  # a repeat


def verl_rows(problems):
    return [{"data_source": "math", "prompt": [{"role": "system", "content": "Think step by step."},
                                               {"role": "user", "content": q}],
             "ability": "math", "reward_model": {"ground_truth": a, "style": "rule"}, "extra_info": {"index": i}}
            for i, (q, a) in enumerate(problems)]


def write_parquet(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


@pytest.fixture
def own(tmp_path, monkeypatch):
    """A repository root with data/own/ holding a GSM8K-style JSONL and a verl parquet file."""
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "data/own/gsm8k_train.jsonl", GSM_ROWS)
    write_parquet(tmp_path / "data/own/test.parquet", verl_rows([("Find $x$ if $x+1=3$.", "$2$"),
                                                                 ("What is $\\frac{1}{2}+\\frac{1}{2}$?", "1")]))
    return tmp_path


def data(**raw) -> DataParams:
    return parse_params({"data": {"vendor_dir": VENDOR, **raw}}, "test").data


def docs_entries() -> dict[str, dict]:
    """docs/data.md's worked entries (its yaml blocks), by their set's name."""
    blocks = re.findall(r"```yaml\n(.*?)```", (REPO / "docs" / "data.md").read_text(), re.S)
    found = {}
    for block in blocks:
        d = yaml.safe_load(block)["data"]
        for item in d.get("train_sets", []) + d.get("benchmarks", []):
            if isinstance(item, dict):
                found[item["name"]] = {"data": {k: v for k, v in d.items() if k not in ("train_sets", "benchmarks")},
                                       "entry": item}
    return found


DOCS = docs_entries()


def test_the_docs_give_three_worked_entries():
    assert sorted(DOCS) == ["gsm8k_test", "gsm8k_train", "my_verl_test"]


def test_the_docs_gsm8k_entry_reads_the_number_after_the_hashes(own):
    entry = DOCS["gsm8k_train"]["entry"]
    p = data(train_sets=[entry], benchmarks=[])
    assert dataset_problems(p) == []
    records = sources.load_set(p.train_sets[0], p, [])
    # the repeat dropped (dedupe), "1,000" read as 1000, each record stating its answer form
    assert [(r.id, r.answer, r.answer_form) for r in records] == [("gsm8k_train-0", "7", "number"),
                                                                  ("gsm8k_train-1", "1000", "number")]


def test_the_docs_verl_entry_reads_verls_parquet_as_it_is(own):
    entry = DOCS["my_verl_test"]["entry"]
    p = data(benchmarks=["math500", entry])
    assert dataset_problems(p) == []
    records = sources.load_set(p.benchmarks[1], p, [])
    assert [(r.problem, r.answer, r.system) for r in records] == [
        ("Find $x$ if $x+1=3$.", "$2$", "Think step by step."),  # the gold as stored, "$" kept (SIREN's reward)
        ("What is $\\frac{1}{2}+\\frac{1}{2}$?", "1", "Think step by step.")]


def test_the_docs_hub_entry_reads_a_mirror_of_the_hub(tmp_path):
    raw = DOCS["gsm8k_test"]
    write_jsonl(tmp_path / "mirror/openai/gsm8k/main/test.jsonl", GSM_ROWS[:2])
    p = data(**{**raw["data"], "hub_mirror": str(tmp_path / "mirror")}, benchmarks=[raw["entry"]])
    records = sources.load_set(p.benchmarks[0], p, [])
    assert [(r.problem, r.answer) for r in records] == [(GSM_ROWS[0]["question"], "7"),
                                                        (GSM_ROWS[1]["question"], "1000")]


def test_a_hub_entry_without_a_hub_to_read_is_refused_at_once():
    with pytest.raises(ConfigError, match="'gsm', which comes from the hub"):
        data(benchmarks=[{"name": "gsm", "hub": "openai/gsm8k", "config": "main", "split": "test"}])


@pytest.mark.parametrize("suffix", [".json", ".csv"])
def test_json_and_csv_files_read_as_jsonl(own, suffix):
    path = own / f"data/own/gsm{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps(GSM_ROWS[:2]))
    else:
        path.write_text('question,answer\n"Tom has 3 apples, buys 4.","#### 7"\nTwice 4?,#### 8\n')
    p = data(train_sets=[{"name": "gsm", "path": f"data/own/gsm{suffix}", "problem": "question", "gold": "gsm8k"}])
    assert [r.answer for r in sources.load_set(p.train_sets[0], p, [])] == ["7", "1000" if suffix == ".json" else "8"]


def test_a_boxed_gold_is_read_from_a_stored_solution(own):
    write_jsonl(own / "data/own/sol.jsonl", [{"problem": "q", "solution": "So $x=\\boxed{\\frac{1}{2}}$. Done."},
                                            {"problem": "r", "solution": "no box here"}])
    entry = {"name": "sol", "path": "data/own/sol.jsonl", "answer": "solution", "gold": "boxed"}
    p = data(train_sets=[entry])
    (problem,) = dataset_problems(p)
    assert "empty on 1 of 2 rows" in problem and "(rows 2)" in problem and "skip_bad_rows: true" in problem
    p = data(train_sets=[{**entry, "skip_bad_rows": True}])
    skipped: list[int] = []
    with pytest.warns(UserWarning, match="skipped 1 row"):
        records = sources.load_set(p.train_sets[0], p, skipped)
    assert [r.answer for r in records] == ["\\frac{1}{2}"] and skipped == [2]


def test_check_params_names_a_missing_file_a_wrong_column_and_an_empty_gold(own):
    missing = data(train_sets=[{"name": "t", "path": "data/own/nope.jsonl"}])
    assert dataset_problems(missing) == ["'data.train_sets[0].path': data/own/nope.jsonl not found: put the file "
                                         "there, or fix the path"]
    wrong = data(train_sets=[{"name": "t", "path": "data/own/gsm8k_train.jsonl", "problem": "qestion"}])
    assert dataset_problems(wrong) == ["'data.train_sets[0].problem' names the column 'qestion', which "
                                       "data/own/gsm8k_train.jsonl does not have; its columns: question, answer"]
    nested = data(benchmarks=[{"name": "v", "path": "data/own/test.parquet", "format": "verl",
                               "answer": "reward_model.truth"}])
    (msg,) = dataset_problems(nested)
    assert "'reward_model.truth' reaches no value" in msg and "holds: ground_truth, style" in msg
    # gold: clean on a GSM8K file reads the whole solution: not empty; the problem column "problem" is absent
    empty = data(train_sets=[{"name": "t", "path": "data/own/gsm8k_train.jsonl", "problem": "question",
                              "answer": "question", "gold": "gsm8k"}])
    (msg,) = dataset_problems(empty)
    assert "is empty on 3 of 3 rows" in msg and "(rows 1, 2, 3)" in msg and "gold:" in msg


def test_check_params_refuses_a_training_set_that_shares_problems_with_a_benchmark(own):
    math500 = [r for r in sources.load_vendored("math500", VENDOR)[:3]]
    write_jsonl(own / "data/own/leak.jsonl", [{"problem": "  " + r.problem.upper(), "answer": r.answer}
                                              for r in math500] + [{"problem": "new", "answer": "1"}])
    p = data(train_sets=[{"name": "leak", "path": "data/own/leak.jsonl"}], benchmarks=["math500", "aime24"])
    (msg,) = dataset_problems(p)
    assert msg.startswith("'data.train_sets' leak and 'data.benchmarks' math500 share 3 problem(s)")
    assert "remove them from one of the files" in msg


def test_check_recipe_runs_the_file_checks(own):
    """check_params (the stage) reads the entries' files, not only their values."""
    from rlvr.tools.preflight import check_recipe

    raw = {"data": {"vendor_dir": VENDOR, "train_sets": [{"name": "t", "path": "data/own/none.parquet"}]}}
    (own / "params.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match="data/own/none.parquet not found"):
        check_recipe(own / "params.yaml")


def test_an_entrys_values_are_checked_when_params_load():
    with pytest.raises(ConfigError) as e:
        data(train_sets=[{"name": "Math500", "path": "/data/x.txt", "hub": "a/b", "format": "verl2",
                          "answer_form": "letter", "limit": 0}, "math_train", "math_train"])
    text = str(e.value)
    for part in ("'data.train_sets[0].name' 'Math500' must be lowercase", "give exactly one of 'path'",
                 "must end in one of .jsonl, .json, .parquet, .csv", "is outside data/own/",
                 "'data.train_sets[0].format' is 'verl2'; valid: columns, verl",
                 "'data.train_sets[0].answer_form' is 'letter'; valid: number, math, choice",
                 "'data.train_sets[0].limit' must be >= 1", "'data.train_sets' names math_train twice"):
        assert part in text
    with pytest.raises(ConfigError, match="registered set's name"):
        data(benchmarks=[{"name": "math500", "path": "data/own/x.jsonl"}])


def test_a_malformed_line_is_an_error_naming_it_unless_the_entry_skips_it(own):
    (own / "data/own/bad.jsonl").write_text('{"problem": "a", "answer": "1"}\nnot json\n')
    p = data(train_sets=[{"name": "bad", "path": "data/own/bad.jsonl"}])
    with pytest.raises(DataError, match="data/own/bad.jsonl:2: not valid JSON"):
        sources.load_set(p.train_sets[0], p, [])
    assert "data/own/bad.jsonl:2" in dataset_problems(p)[0]
    p = data(train_sets=[{"name": "bad", "path": "data/own/bad.jsonl", "skip_bad_rows": True}])
    skipped: list[int] = []
    assert len(sources.load_set(p.train_sets[0], p, skipped)) == 1 and skipped == [2]


def test_the_registered_sets_are_entries_read_by_the_one_loader():
    assert set(REGISTERED) == {*BENCHMARKS, *OFFLINE_TRAIN_SETS, "deepscaler", "dapo_math", "openr1_math"}
    p = data(train_sets=["math_train"], benchmarks=["math500"])
    assert [r.id for r in sources.load_set("math500", p)[:2]] == ["math500-0", "math500-1"]
    online = data(source="online", train_sets=["math_train"], benchmarks=[])
    assert len(sources.load_set("math_train", online, [])) > 7000  # a set only vendored is read so online too


def test_the_vendored_sets_share_only_the_problems_the_report_counts():
    """Measured on the vendored copies: aime_1983_2023 and math500 share 3 problems (MATH500 holds AIME
    problems); no other training set shares any with a benchmark. The data stage counts them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        keys = {n: {problem_key(r.problem) for r in sources.load_vendored(n, VENDOR, True, [])}
                for n in BENCHMARKS + OFFLINE_TRAIN_SETS}
    shared = {(t, b): len(keys[t] & keys[b]) for t in OFFLINE_TRAIN_SETS for b in BENCHMARKS if keys[t] & keys[b]}
    assert shared == {("aime_1983_2023", "math500"): 3}


def test_prepare_writes_each_sets_source_rows_and_shared_problems(own):
    math500 = sources.load_vendored("math500", VENDOR)[:2]
    write_jsonl(own / "data/own/t.jsonl", [{"q": r.problem, "a": r.answer} for r in math500] +
                [{"q": "Compute 1+1.", "a": "2"}])
    p = data(out_dir=str(own / "prepared"), train_sets=["arithmetic", {"name": "mine", "path": "data/own/t.jsonl",
                                                                      "problem": "q", "answer": "a"}],
             benchmarks=["math500", DOCS["my_verl_test"]["entry"]])
    counts = prepare(p)
    sets = json.loads(p.sets_file.read_text())
    assert sets["train/mine"] == {"role": "train", "source": "data/own/t.jsonl", "rows": 3, "skipped": 0,
                                  "shared": {"math500": 2}}
    assert sets["eval/my_verl_test"]["source"] == "data/own/test.parquet" and counts["my_verl_test"] == 2
    assert sets["eval/math500"]["source"].endswith("data/vendor/benchmarks/math500.jsonl")
    assert sets["train/arithmetic"]["shared"] == {}
    assert [r.system for r in read_records(p.eval_dir / "my_verl_test.jsonl")] == ["Think step by step."] * 2


def test_a_choice_task_rewards_the_gold_letter_with_every_grader():
    responses = ["The answer is \\boxed{(B)}", "Answer: b", "\\boxed{C}", "Answer: 7", "I pick one."]
    for grader in ("math_verify", "deepscaler", "siren_official"):
        g = grade_with(grader, "train", ["B"], responses, 5, None, "Which? (A) 1 (B) 2 (C) 3", form=CHOICE)
        assert [it.correct for it in g.items] == [True, True, False, False, False]
        assert [it.status for it in g.items][3:] == ["not_a_choice", "no_answer"]
        assert g.majority_correct  # B twice, C once


def test_a_hub_entry_reads_and_names_one_resolved_commit(monkeypatch):
    """Online, the revision (none: the newest) is resolved to a commit once: the load reads that commit
    and the report names it."""
    import datasets
    import huggingface_hub

    from rlvr.data.prepare import source_of

    asked = []

    class Api:
        def dataset_info(self, repo, revision=None):
            asked.append((repo, revision))
            return type("Info", (), {"sha": "0123abc"})()

    loaded = {}

    def load_dataset(repo, config, split, revision):
        loaded.update(repo=repo, config=config, split=split, revision=revision)
        return [{"question": "Two and two?", "answer": "#### 4"}]

    sources.hub_commit.cache_clear()
    monkeypatch.setattr(huggingface_hub, "HfApi", Api)
    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    entry = {"name": "gsm", "hub": "openai/gsm8k", "config": "main", "split": "test", "problem": "question",
             "gold": "gsm8k"}
    p = data(source="online", benchmarks=[entry])
    try:
        assert [r.answer for r in sources.load_set(p.benchmarks[0], p, [])] == ["4"]
        assert loaded == {"repo": "openai/gsm8k", "config": "main", "split": "test", "revision": "0123abc"}
        assert source_of(p.benchmarks[0], p) == "hub openai/gsm8k (main), split test, commit 0123abc"
        assert asked == [("openai/gsm8k", None)]  # resolved once, for the load and the report alike
    finally:
        sources.hub_commit.cache_clear()
