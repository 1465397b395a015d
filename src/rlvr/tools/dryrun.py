"""A CPU dry run of a paper recipe: the recipe unchanged but for its sizes.

`rlvr dryrun params/disco_1.5b.yaml` (one process per recipe: vLLM
engines do not share a process well) runs the real prepare -> train
(2 steps, validated at each) -> evaluate path of every method of the recipe on a
tiny random model of the recipe's architecture (Qwen2 or Llama), with the
online data loaders fed from data/vendor/hub (rows in the hub's format). It
shows that every setting is accepted and reaches the code that uses it
(ZeRO stage, gradient checkpointing, warm-up, weight decay, every objective
param) before a GPU is rented, and evaluates each released checkpoint's row
(the tiny model standing in for the hub id). What it overrides is listed in SIZE;
`--set train.snapshot_every=1` (any dotted setting) changes the sized recipe
further, e.g. to run the paper's checkpoint protocol, whose table it prints;
`--method NAME` (repeatable) runs only those methods.
"""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

import yaml

from rlvr.schema import ConfigError
from rlvr.settings.load import read_yaml, yaml_value

# What a dry run changes: sizes, the device, and where data and model come from.
SIZE = {
    "data": {"out_dir": None, "hub_mirror": "data/vendor/hub", "validation_size": 2},
    "engine": {"max_model_len": 512, "kv_cache_gib": 1, "enforce_eager": True},
    "eval": {"k": 2, "max_new_tokens": 16},
    "validation": {"max_new_tokens": 16},
    "launcher": {"kind": "python", "procs_per_node": 1, "nodes": 1, "hostfile": None},
    "verifier": {"workers": 1},
    "train": {"steps": 2, "questions_per_step": 2, "responses_per_question": 2, "mini_batch_questions": 2,
              "micro_batch_questions": 1, "max_response_tokens": 16, "eval_every": 1, "checkpoint_every": 1},
}


def architecture(source: str) -> str:
    """qwen2 for the Qwen and DeepSeek-R1-Distill-Qwen models, llama for Llama ones."""
    name = source.lower()
    if "qwen" in name:
        return "qwen2"
    if "llama" in name or name == "smollm2":
        return "llama"
    raise ValueError(f"no tiny architecture known for model.source '{source}' (Qwen or Llama)")


def tiny_model(arch: str, tokenizer_dir: str | Path, out: Path) -> Path:
    """A 2-layer random model of `arch` with an offline tokenizer (SmolLM2's, chat template included)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    common = dict(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=1024,
                  bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    config, cls = (Qwen2Config(**common, tie_word_embeddings=False), Qwen2ForCausalLM) if arch == "qwen2" \
        else (LlamaConfig(**common, tie_word_embeddings=True), LlamaForCausalLM)
    torch.manual_seed(0)
    cls(config).save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    return out


def sized(recipe: dict, model_dir: Path, work: Path) -> dict:
    """The recipe with SIZE applied (and per-set k and limits shrunk to 2 or 3)."""
    raw = copy.deepcopy(recipe)
    for section, values in SIZE.items():
        raw.setdefault(section, {}).update(values)
    raw["data"]["out_dir"] = str(work / "data")
    raw["model"].update({"source": str(model_dir), "out_dir": str(work / "models/base")})
    sets = ["arithmetic", *raw["data"]["benchmarks"]]
    raw["eval"]["limits"] = {s: 2 for s in sets}
    # keep per-set k where the recipe has it, so that path runs too
    raw["eval"]["k_per_set"] = {s: 3 for s in (raw["eval"].get("k_per_set") or {})}
    # released checkpoints are hub ids: the tiny model stands in for each (evaluate_checkpoint's path)
    raw["checkpoints"] = {name: str(model_dir) for name in raw.get("checkpoints") or {}}
    for entry in raw["methods"].values():  # DAPO's overlong buffer is a length: a quarter of the response
        if (entry or {}).get("overlong_buffer"):
            entry["overlong_buffer"] = SIZE["train"]["max_response_tokens"] // 4
    return raw


def with_sets(raw: dict, sets: list[str]) -> dict:
    """The recipe with each "section.key=value" (a YAML value) set."""
    for item in sets:
        key, sep, value = item.partition("=")
        *path, last = key.split(".")
        if not sep or not path:
            raise ConfigError([f"--set {item!r}: write section.key=value, e.g. train.snapshot_every=1"],
                              "rlvr dryrun")
        node = raw
        for part in path:
            node = node.setdefault(part, {})
        node[last] = yaml_value(value)
    return raw


def dry_run(recipe_path: Path, tokenizer_dir: Path, work: Path, vendor_dir: Path | None = None,
            sets: list[str] = (), methods: list[str] = ()) -> dict:
    """Runs every method of the recipe (or `methods`); returns what each setting became in the code."""
    from transformers import AutoTokenizer

    from rlvr.data.prepare import prepare
    from rlvr.evaluation.evaluator import model_source, run_evaluation
    from rlvr.model import materialize
    from rlvr.rollout.vllm_engine import RolloutEngine
    from rlvr.runs import Run
    from rlvr.settings.methods import method_config, parse_recipe
    from rlvr.training.trainer import Trainer

    recipe = read_yaml(recipe_path)
    arch = architecture(recipe["model"]["source"])
    raw = with_sets(sized(recipe, tiny_model(arch, tokenizer_dir, work / "tiny"), work), list(sets))
    if vendor_dir:
        raw["data"].update({"vendor_dir": str(vendor_dir), "hub_mirror": str(vendor_dir / "hub")})
    params = parse_recipe(raw)
    unknown = [m for m in methods if m not in params.methods]
    if unknown:
        raise ConfigError([f"--method {', '.join(unknown)}: not a method of {recipe_path} (its methods: "
                           f"{', '.join(params.methods)})"], "rlvr dryrun")
    base = materialize(params.model.source, params.model.out_dir, params.model.dtype)
    counts = prepare(params.data, params.prompt.for_training(), AutoTokenizer.from_pretrained(base))
    engine = RolloutEngine.from_params(str(base), params.engine, params.model.dtype)
    report = {"architecture": arch, "rows": counts, "methods": {}}
    for name in methods or params.methods:
        method = method_config(params, name)
        run = Run(name, 0)
        trainer = Trainer(params, method, str(base), work / run.run_dir, work / run.model_dir, rollout_engine=engine,
                          steps_file=work / run.train_dir / "steps.csv")
        rows = trainer.train()
        ds = trainer.ds_engine
        evaluated = run_evaluation(work / run.model_dir, params, work / run.eval_dir, rollout_engine=engine)
        report["methods"][name] = {
            "steps": [r["step"] for r in rows], "lr": [r["lr"] for r in rows],
            "zero_stage": ds.zero_optimization_stage(), "bf16": ds.bfloat16_enabled(),
            "gradient_checkpointing": bool(getattr(ds.module, "is_gradient_checkpointing", False)),
            "weight_decay": ds.optimizer.param_groups[0]["weight_decay"],
            "snapshots": [s["step"] for s in json.loads((work / run.model_dir / "snapshots.json").read_text())],
            "evaluated_steps": sorted(int(s) for s in json.loads(
                (work / run.eval_dir / "by_step.json").read_text())["steps"]),
            "k_per_set": evaluated["metrics"]["k_per_set"],
            "validation_k": trainer.validator.profile.k,
            "loss": [r["loss"] for r in rows],
        }
    report["checkpoints"] = {}
    for name in params.checkpoints:
        run = Run(name, external=True)
        evaluated = run_evaluation(model_source(params, run), params, work / run.eval_dir, rollout_engine=engine)
        report["checkpoints"][name] = {"k_per_set": evaluated["metrics"]["k_per_set"],
                                       "problems": evaluated["metrics"]["mean"]["n_problems"]}
    report.update(report_tables(params, list(methods or params.methods), work,
                                Path(params.data.vendor_dir) / "paper_results.yaml"))
    return report


def report_tables(params, methods: list[str], work: Path, paper_path: Path) -> dict[str, str | None]:
    """The report's checkpoint section and claims table, fed from the dry run's outputs."""
    from rlvr.report.checkpoints import checkpoint_section
    from rlvr.report.claims import all_claim_rows, claims_table
    from rlvr.report.inputs import load_results
    from rlvr.report.scale import RunScale
    from rlvr.runs import Run

    runs = [Run(name, 0) for name in methods] + [Run(name, external=True) for name in params.checkpoints]
    results = load_results(work, runs)
    entry = (yaml.safe_load(paper_path.read_text()) or {}).get(params.report.paper_profile) or {}
    objectives = {name: m.objective for name, m in params.methods.items()}
    rows = all_claim_rows(results, objectives, params.eval.k, entry, params.report.ablations, RunScale.of(params))
    return {"checkpoint_selection": checkpoint_section(results, params.eval.k), "claims": claims_table(rows)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("recipe", type=Path)
    ap.add_argument("--tokenizer", default="models/base", help="an offline tokenizer with a chat template")
    ap.add_argument("--work", type=Path, default=Path("runs/dryrun"))
    ap.add_argument("--vendor", type=Path, default=None, help="data/vendor of the repository (default: the recipe's)")
    ap.add_argument("--report", type=Path, default=None, help="also write the report (JSON) here")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="SECTION.KEY=VALUE",
                    help="change a setting of the sized recipe (repeatable), e.g. train.snapshot_every=1")
    ap.add_argument("--method", dest="methods", action="append", default=[], metavar="NAME",
                    help="run only this method of the recipe (repeatable; default: every one)")
    args = ap.parse_args(argv)
    report = dry_run(args.recipe, Path(args.tokenizer), args.work / args.recipe.stem, args.vendor, args.sets,
                     args.methods)
    text = json.dumps(report, indent=2)
    print(text)
    if args.report:
        args.report.write_text(text)
    return 0


if __name__ == "__main__":
    from rlvr.cli import tool

    tool(main)
