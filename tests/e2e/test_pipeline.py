"""End to end: the real DAG (data -> model -> train -> vLLM evaluate -> report ->
MLflow) on tiny params, under DVC: what reruns, push and pull, queued experiments.
One rank: the stages on two ranks under the DeepSpeed launcher are
tests/e2e/test_distributed.py's and test_stopping.py's."""

import csv
import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from helpers import clean_env, copy_repo

pytestmark = pytest.mark.slow

# A researcher's own sets, written by the tests into data/own/: a GSM8K-style JSONL trained on, a verl
# parquet evaluated on (docs/data.md's first two worked entries)
OWN_TRAIN = {"name": "mine", "path": "data/own/mine.jsonl", "problem": "question", "gold": "gsm8k",
             "answer_form": "number"}
OWN_EVAL = {"name": "my_verl", "path": "data/own/test.parquet", "format": "verl"}
TINY = {
    "seeds": [0],  # the default's three seeds are three times the stages: one proves the path
    "data": {"arithmetic": {"levels": [1, 2], "n_train": 20, "n_test_per_level": 3, "n_validation_per_level": 0},
             "train_sets": ["arithmetic", OWN_TRAIN], "benchmarks": ["math500", OWN_EVAL],
             "validation_size": 4},
    "engine": {"kv_cache_gib": 1, "max_model_len": 512},
    "eval": {"k": 2, "max_new_tokens": 48, "limits": {"math500": 2}},
    "validation": {"k": 2, "max_new_tokens": 16},
    "tracking": {"log_samples": 5},
    "train": {"steps": 2, "questions_per_step": 2, "responses_per_question": 2, "mini_batch_questions": 2,
              "micro_batch_questions": 1, "max_response_tokens": 16, "checkpoint_every": 1, "eval_every": 1},
}
METHODS = ("grpo",)  # one trained method: the others are the dry runs' and the trainer tests'


def deep_update(d: dict, u: dict) -> dict:
    for k, v in u.items():
        d[k] = deep_update(d.get(k, {}), v) if isinstance(v, dict) else v
    return d


def run(cmd, cwd, **kw):
    env = clean_env(PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    env.pop("MLFLOW_TRACKING_URI", None)  # the project's own store: <repo>/mlflow.db
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, **kw)


def write_own_sets(root: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    own = root / "data" / "own"
    rows = [{"question": f"Sam has {a} pens and gets {b} more. How many pens?", "answer": f"{a} + {b}\n#### {a + b}"}
            for a, b in [(2, 3), (4, 1), (5, 2), (1, 6), (3, 3), (7, 1)]]
    (own / "mine.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    turns = lambda q: [{"role": "system", "content": "Be brief."}, {"role": "user", "content": q}]  # noqa: E731
    pq.write_table(pa.Table.from_pylist([
        {"data_source": "mine", "prompt": turns(q), "ability": "math",
         "reward_model": {"ground_truth": a, "style": "rule"}} for q, a in [("What is $6 \\times 7$?", "42"), ("What is $9 - 4$?", "5")]]), own / "test.parquet")


def tiny_repo(tmp_path_factory, **overrides) -> Path:
    root = copy_repo(tmp_path_factory.mktemp("repo"))
    write_own_sets(root)
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["methods"] = {m: params["methods"][m] for m in METHODS}  # two suffice, whatever the default runs
    params["sweep"]["grid"] = {m: g for m, g in params["sweep"]["grid"].items() if m in METHODS}
    (root / "params.yaml").write_text(yaml.safe_dump(deep_update(deep_update(params, TINY), overrides)))
    run(["git", "add", "-A"], root)  # the own sets too: a queued experiment copies what git holds
    run(["git", "commit", "-qm", "tiny params"], root)
    return root


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory, tiny_model):
    # a local model evaluated as a released checkpoint's row (a hub id on a GPU node)
    root = tiny_repo(tmp_path_factory, checkpoints={"released_tiny": str(tiny_model)},
                     model={"source": str(tiny_model)})  # the stages' real code on a model that runs in seconds
    out = run([sys.executable, "-m", "dvc", "repro"], root, timeout=2400)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return root, out


def test_repro_writes_metrics_per_level(pipeline):
    root, out = pipeline
    m = json.loads((root / "reports/eval/base/metrics.json").read_text())
    arith = m["benchmarks"]["arithmetic"]
    assert set(arith["levels"]) == {"1", "2"} and m["ranks"] == 1
    assert arith["n_problems"] == 6 and m["benchmarks"]["math500"]["n_problems"] == 2
    assert m["benchmarks"]["my_verl"]["n_problems"] == 2  # the verl parquet, evaluated as it is
    for key in ("avg@2", "pass@1", "pass@2", "maj@2"):
        assert 0.0 <= arith[key] <= 1.0
    assert arith["pass@2"] >= arith["pass@1"] == pytest.approx(arith["avg@2"])
    rows = [json.loads(line) for line in (root / "reports/eval/base/samples.jsonl").read_text().splitlines()]
    assert len(rows) == (6 + 2 + 2) * 2  # every problem once, from whichever rank generated it
    assert {"id", "response", "extracted", "correct"} <= set(rows[0])
    ar = [r for r in rows if r["benchmark"] == "arithmetic"]
    assert arith["avg@2"] == pytest.approx(sum(r["correct"] for r in ar) / len(ar))
    for stage in ("evaluate@base", "train@grpo/seed0", "report"):
        assert f"[{stage}] done in" in out.stdout
    assert out.stdout.count("[train@grpo/seed0] done in") == 1  # rank 0 speaks for the stage


@pytest.mark.xfail(strict=True, reason="a stage run on one rank (the default's launcher) leaves its trained weights "
                   "as a second copy beside DVC's cache, not a hard link; on two ranks they are linked (cause open)")
def test_the_trained_weights_are_a_hard_link_to_the_dvc_cache(pipeline):
    root, _ = pipeline
    model = root / "models/grpo/seed0/model.safetensors"
    cached = [p for p in (root / ".dvc/cache/files/md5").rglob("*") if p.stat().st_ino == model.stat().st_ino]
    assert cached, "the trained weights should be a hard link to the DVC cache (cache.type), not a second copy"


def test_a_released_checkpoint_is_evaluated_as_a_marked_row(pipeline, tiny_model):
    """checkpoints: {name: path} -> evaluate_checkpoint@<name> (the
    evaluation profile of every row) -> a row of every table, marked, in no claim."""
    root, out = pipeline
    m = json.loads((root / "reports/eval/released_tiny/metrics.json").read_text())
    assert m["model"] == str(tiny_model) and m["ranks"] == 1 and m["k"] == 2
    problems = [json.loads(line) for line in (root / "reports/eval/released_tiny/problems.jsonl").read_text().splitlines()]
    assert len(problems) == 6 + 2 + 2 and all(r["perplexity"] >= 1 and 0 <= r["distinct"] <= 2 for r in problems)
    assert "[evaluate@released_tiny] done in" in out.stdout
    md = (root / "reports/results.md").read_text()
    assert "| released_tiny (released checkpoint) | " in md.split("## Main table")[1].split("\n## ")[0]
    assert "released_tiny" not in md.split("## The papers' claims")[1].split("\n## ")[0]
    assert "not trained: released_tiny" in md


def test_validation_keeps_and_scores_only_the_best_checkpoint(pipeline):
    root, _ = pipeline
    rows = list(csv.DictReader(open(root / "reports/train/grpo/seed0/steps.csv")))
    val = {int(r["step"]): float(r["val_avg@k"]) for r in rows}
    assert sorted(val) == [1, 2]  # eval_every 1: every step validated on the 4 held-out problems
    best = max(val, key=lambda s: (val[s], -s))  # ties keep the earlier step
    listed = json.loads((root / "models/grpo/seed0/snapshots.json").read_text())
    assert [s["step"] for s in listed] == sorted({best, 2}) and listed[-1]["path"] == "."
    assert [s["step"] for s in listed if s["best"]] == [best]
    assert [s["validation"] for s in listed] == [val[s["step"]] for s in listed]
    kept = sorted(p.name for p in (root / "runs/grpo/seed0/snapshots").glob("step_*"))
    assert kept == ([] if best == 2 else ["step_000001"])  # pruned to what can still be chosen
    by_step = json.loads((root / "reports/eval/grpo/seed0/by_step.json").read_text())
    assert sorted(by_step["steps"], key=int) == [str(s["step"]) for s in listed]  # the full protocol on these only
    train_rows = (root / "data/prepared/train/train.jsonl").read_text().splitlines()
    held_out = (root / "data/prepared/train/validation.jsonl").read_text().splitlines()
    assert len(held_out) == 4 and len(train_rows) == 20 + 6 - 4 and not set(held_out) & set(train_rows)

    md = (root / "reports/results.md").read_text()
    assert "Checkpoint selection: the final model and the best on validation" in md
    assert "never on the test sets" in md and (root / "reports/figures/validation.png").exists()


def test_the_report_compares_the_graders_on_the_runs_samples(pipeline):
    root, _ = pipeline
    agreement = json.loads((root / "reports/grader_agreement.json").read_text())
    samples = sum(len(p.read_text().splitlines()) for p in (root / "reports/eval").rglob("samples.jsonl"))
    assert agreement["run_samples"]["n"] == samples > 0
    for where in ("run_samples", "synthetic"):
        for pair in agreement[where]["pairs"].values():
            assert pair["both"] + pair["ours_only"] + pair["theirs_only"] + pair["neither"] == agreement[where]["n"]
    md = (root / "reports/results.md").read_text()
    assert "Graded by math_verify" in md and "## Appendix: the graders compared" in md


def test_mlflow_runs_nested_under_one_pipeline_run(pipeline):
    root, _ = pipeline
    db = sqlite3.connect(root / "mlflow.db")
    runs = {name: uuid for uuid, name in db.execute("select run_uuid, name from runs").fetchall()}
    stage_runs = {"prepare_data", "prepare_model", "train@grpo/seed0", "evaluate@base", "evaluate@grpo/seed0",
                  "evaluate@released_tiny", "report"}
    parents = {n for n in runs if n.startswith("pipeline ")}
    assert set(runs) == stage_runs | parents and len(parents) == 1
    parent = runs[parents.pop()]
    for name in stage_runs:
        tags = dict(db.execute("select key, value from tags where run_uuid=?", (runs[name],)).fetchall())
        trained = name.startswith("evaluate@") and name.endswith("/seed0")  # nested under its training
        assert tags["mlflow.parentRunId"] == (runs["train@" + name.split("@")[1]] if trained else parent), name
        assert tags["stage"] == name and len(tags["git_commit"]) == 40 and tags["dvc_exp"] == "workspace"
        assert (tags.get("table") == "model") == name.startswith("train@")  # the runs table's rows
    kind = dict(db.execute("select key, value from experiment_tags").fetchall())
    assert kind["mlflow.experimentKind"] == "custom_model_development"
    # the runs table's saved view: every column it selects is one the runs logged
    view = json.loads(kind["mlflow.sharedViewState.runs"])
    logged = {f"metrics.`{k}`" for (k,) in db.execute("select distinct key from metrics")} | \
        {f"params.`{k}`" for (k,) in db.execute("select distinct key from params")} | \
        {f"tags.`{k}`" for (k,) in db.execute("select distinct key from tags")}
    assert set(view["selectedColumns"]) <= logged, set(view["selectedColumns"]) - logged
    ev = runs["evaluate@base"]
    metrics = dict(db.execute("select key, value from metrics where run_uuid=?", (ev,)).fetchall())
    assert "arithmetic/avg_at_2" in metrics and "mean/pass_at_2" in metrics
    params = dict(db.execute("select key, value from params where run_uuid=?", (ev,)).fetchall())
    assert params["eval.k"] == "2" and params["external"] == "False"
    released = dict(db.execute("select key, value from params where run_uuid=?",
                               (runs["evaluate@released_tiny"],)).fetchall())
    assert released["external"] == "True" and released["model_path"].endswith("model")
    steps = db.execute("select step from metrics where run_uuid=? and key='train/reward_mean' order by step",
                       (runs["train@grpo/seed0"],)).fetchall()
    assert steps == [(1,), (2,)]
    train = dict(db.execute("select key, value from metrics where run_uuid=?", (runs["train@grpo/seed0"],)).fetchall())
    evaluated = dict(db.execute("select key, value from metrics where run_uuid=?",
                                (runs["evaluate@grpo/seed0"],)).fetchall())
    assert train["eval mean avg_at_2"] == evaluated["eval mean avg_at_2"] == round(evaluated["mean/avg_at_2"], 4)
    assert "val/avg_at_k" in train and "train details/time_total" in train  # sectioned names
    artifacts = {p.name for p in (root / "mlartifacts").rglob("step_*.json")}
    assert artifacts == {"step_000001.json", "step_000002.json"}  # a completions table per step
    inputs = db.execute("select d.name, d.digest from inputs i join datasets d on i.source_id = d.dataset_uuid "
                        "where i.destination_id = ?", (runs["train@grpo/seed0"],)).fetchall()
    assert [n for n, _ in inputs] == ["train"] and len(inputs[0][1]) == 16
    models = db.execute("select name from logged_models").fetchall()
    assert {"grpo-seed0", "base"} <= {m for (m,) in models}


def _stale(root: Path) -> set[str]:
    out = run([sys.executable, "-m", "dvc", "status"], root)
    return {m.group(1) for m in re.finditer(r"^(\S+):\s*$", out.stdout, re.M)}


@pytest.mark.parametrize("change,expected", [
    ({"eval": {"k": 1}}, {"evaluate_base", "evaluate@grpo-0", "evaluate_checkpoint@released_tiny"}),
    ({"methods": {"grpo": {"clip_low": 0.1}}}, {"train@grpo-0", "report"}),  # the report reads the method list
    ({"data": {"benchmarks": ["math500", OWN_EVAL, "aime24"]}}, {"prepare_data", "evaluate_base", "evaluate@grpo-0",
                                                      "evaluate_checkpoint@released_tiny"}),
    ({"checkpoints": {"released_tiny": "another/model"}}, {"evaluate_checkpoint@released_tiny", "report"}),
    ({"report": {"paper_profile": "1.5b"}}, {"report"}),
])
def test_a_params_change_makes_only_its_stages_stale(pipeline, change, expected):
    """dvc status names the stages a change touches directly (and check_params,
    which reads every value); what depends on their outputs reruns as those
    outputs change."""
    root, _ = pipeline
    original = (root / "params.yaml").read_text()
    assert _stale(root) == set()
    try:
        (root / "params.yaml").write_text(yaml.safe_dump(deep_update(yaml.safe_load(original), change)))
        assert _stale(root) == expected | {"check_params"}
    finally:
        (root / "params.yaml").write_text(original)


def test_own_sets_train_evaluate_and_rerun_when_their_file_changes(pipeline):
    """The JSONL entry trained on, the verl parquet evaluated on and named in the held-out table and the
    Data section; an edit of the JSONL makes exactly the stages that read data/own/ stale."""
    root, _ = pipeline
    trained = [json.loads(line) for line in (root / "data/prepared/train/train.jsonl").read_text().splitlines()]
    mine = [r for r in trained if r["source"] == "mine"]
    held = [json.loads(line) for line in (root / "data/prepared/train/validation.jsonl").read_text().splitlines()]
    assert len(mine) + sum(r["source"] == "mine" for r in held) == 6
    assert {r["answer_form"] for r in mine} == {"number"} and "7" in {r["answer"] for r in mine}
    results = (root / "reports/results.md").read_text()
    header = next(line for line in results.splitlines() if line.startswith("| ") and "my_verl" in line
                  and "math500" in line)  # the held-out table: a column per set
    assert "arithmetic" in header and "mean" in header
    assert "| mine | training | data/own/mine.jsonl | 6 |" in results
    assert "| my_verl | evaluation | data/own/test.parquet | 2 |" in results
    db = sqlite3.connect(root / "mlflow.db")  # each entry's own file, an MLflow dataset input of the data stage
    inputs = set(db.execute("select d.name, t.value from datasets d join inputs i on i.source_id = d.dataset_uuid "
                            "join input_tags t on t.input_uuid = i.input_uuid where t.name = 'mlflow.data.context'"))
    assert {("mine", "train source"), ("my_verl", "eval source")} <= inputs, inputs
    path = root / "data/own/mine.jsonl"
    original = path.read_text()
    try:
        path.write_text(original + json.dumps({"question": "Ann has 8 pens and loses 2. How many?",
                                               "answer": "#### 6"}) + "\n")
        assert _stale(root) == {"check_params", "prepare_data"}
    finally:
        path.write_text(original)
    assert _stale(root) == set()


def test_bad_params_stop_dvc_repro_before_any_output_is_removed(pipeline, tiny_model):
    root, _ = pipeline
    original = (root / "params.yaml").read_text()
    kept = ["models/base/model.safetensors", "models/grpo/seed0/model.safetensors",
            "reports/train/grpo/seed0/summary.json", "reports/eval/base/metrics.json"]
    before = {p: (root / p).read_bytes() for p in kept}
    params = yaml.safe_load(original)
    params["eval"].update({"kk": 3, "k": 100000})
    params["train"]["lr"] = -1e-6
    params["model"]["source"] = "models/nowhere"
    params["launcher"].update(kind="deepspeed", procs_per_node=3)
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    try:
        out = run([sys.executable, "-m", "dvc", "repro"], root, timeout=600)
        assert out.returncode != 0
        assert re.findall(r"Running stage '([^']+)'", out.stdout) == ["check_params"]
        for said in ("unknown key 'eval.kk' (did you mean 'eval.k'?)", "'eval.k' must be in [1, 1024]",
                     "'train.lr' must be > 0", "models/nowhere is not a local directory",
                     "must be a multiple of the number of ranks (3"):
            assert said in out.stderr, said
        assert {p: (root / p).read_bytes() for p in kept} == before  # nothing removed, nothing rewritten
    finally:
        (root / "params.yaml").write_text(original)
    _dvc(root, "checkout", "--force", "check_params")  # as the error's note says: the removed output back
    assert _stale(root) == set()


def _git(root: Path, *args):
    out = run(["git", *args], root)
    assert out.returncode == 0, out.stdout + out.stderr
    return out


def _dvc(root: Path, *args, timeout=1800):
    out = run([sys.executable, "-m", "dvc", *args], root, timeout=timeout)
    assert out.returncode == 0, " ".join(args) + "\n" + out.stdout[-3000:] + out.stderr[-3000:]
    return out


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def test_push_pull_reproduces_every_table_without_retraining(pipeline, tmp_path):
    """A teammate's fresh clone + dvc pull: nothing trains or evaluates again,
    and the report rebuilt from the pulled inputs is the same, byte for byte."""
    root, _ = pipeline
    remote, origin, clone = tmp_path / "remote", tmp_path / "origin.git", tmp_path / "clone"
    _dvc(root, "remote", "add", "-d", "-f", "shared", str(remote))
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "results")
    _dvc(root, "push")
    assert _size(remote) > 0
    assert not (root / "runs").resolve() in [p.resolve() for p in remote.rglob("*")]
    _git(tmp_path, "init", "-q", "--bare", str(origin))
    _git(root, "remote", "add", "origin", str(origin))
    _git(root, "push", "-q", "origin", "HEAD:main")
    _git(tmp_path, "clone", "-q", "-b", "main", str(origin), str(clone))
    _dvc(clone, "pull")
    assert (clone / "models/grpo/seed0/model.safetensors").exists() and not (clone / "runs/grpo").exists()
    for snap in json.loads((clone / "models/grpo/seed0/snapshots.json").read_text()):  # re-evaluable
        assert (clone / "models/grpo/seed0" / snap["path"] / "model.safetensors").exists()
    t0 = time.perf_counter()
    out = _dvc(clone, "repro")
    print(f"[round trip] pushed {_size(remote) / 2**20:.1f} MiB; pulled dvc repro {time.perf_counter() - t0:.1f} s")
    assert "Running stage" not in out.stdout, out.stdout[-3000:]
    original = (root / "reports/results.md").read_bytes()
    rebuilt = _dvc(clone, "repro", "-f", "-s", "report")  # -s: force the report alone, not its upstream
    assert [m for m in re.findall(r"Running stage '([^']+)'", rebuilt.stdout)] == ["report"]
    assert (clone / "reports/results.md").read_bytes() == original
    # experiments travel too: dvc exp push / pull through the git remote and the DVC remote
    exp = _dvc(root, "exp", "run", "-n", "with-paper-rows", "-S", "report.paper_profile=1.5b")
    assert [m for m in re.findall(r"Running stage '([^']+)'", exp.stdout)] == ["check_params", "report"]
    _dvc(root, "exp", "push", "origin", "with-paper-rows")
    _dvc(clone, "exp", "pull", "origin", "with-paper-rows")
    assert "with-paper-rows" in _dvc(clone, "exp", "show", "--no-pager", "--md").stdout
    _dvc(clone, "exp", "apply", "with-paper-rows")
    assert "(paper, 8k/8k)" in (clone / "reports/results.md").read_text()


def test_queued_experiments_land_in_the_main_mlflow_store(pipeline):
    """The README's `dvc exp run --queue -S train.lr=5e-5` (DVC writes `5e-05`, a YAML 1.2 float) and
    the tuning sweep's `rlvr sweep queue` (one configuration: grpo's lr), then dvc queue start:
    both experiments succeed, in dvc exp show, their MLflow runs in the user's store (not the
    temporary copy's), tagged, and `rlvr sweep table` scores the configuration on validation."""
    root, _ = pipeline
    original = (root / "params.yaml").read_text()
    params = yaml.safe_load(original)
    params["sweep"] = {"seed": 0, "grid": {"grpo": {"lr": [5e-5]}}}
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    _git(root, "commit", "-qam", "a one-configuration sweep")
    try:
        _dvc(root, "exp", "run", "--queue", "-n", "q-lr", "-S", "train.lr=5e-5")
        sweep = run([sys.executable, "-m", "rlvr", "sweep", "queue"], root)
        assert sweep.returncode == 0 and "queued sweep-grpo-lr5e-05" in sweep.stdout, sweep.stdout + sweep.stderr
        _dvc(root, "queue", "start", "-j", "1")
        deadline = time.time() + 1800
        while time.time() < deadline:
            status = run([sys.executable, "-m", "dvc", "queue", "status"], root).stdout
            if "Queued" not in status and "Running" not in status:
                break
            time.sleep(5)
        assert status.count("Success") == 2 and "Failed" not in status, status
        shown = _dvc(root, "exp", "show", "--no-pager", "--only-changed", "--md").stdout
        assert "q-lr" in shown and "sweep-grpo-lr5e-05" in shown and "5e-05" in shown
        table = run([sys.executable, "-m", "rlvr", "sweep", "table"], root)
        assert table.returncode == 0, table.stdout + table.stderr
        row = next(line for line in (root / "reports/sweep.md").read_text().splitlines() if line.startswith("| 5e-05"))
        assert re.search(r"\| 0?\.\d{3} \[\d\.\d{3}, \d\.\d{3}\] \|", row) and "**chosen**" in row, row
        db = sqlite3.connect(root / "mlflow.db")
        tagged = db.execute("select r.name, t.value from runs r join tags t on r.run_uuid = t.run_uuid "
                            "where t.key = 'dvc_exp'").fetchall()
        assert ("train@grpo/seed0", "q-lr") in tagged and ("train@grpo/seed0", "sweep-grpo-lr5e-05") in tagged
        assert not list((root / ".dvc/tmp").rglob("mlflow.db"))  # nothing left in a temporary copy's store
    finally:
        (root / "params.yaml").write_text(original)
        _git(root, "commit", "-qam", "the sweep back")


def test_dvc_plots_show_renders_the_reports_figures_offline(pipeline):
    root, _ = pipeline
    _dvc(root, "plots", "show")
    page = (root / "dvc_plots/index.html").read_text()
    assert "training_dynamics" in page
