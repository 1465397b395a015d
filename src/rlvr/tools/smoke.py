"""Prove a node before a long run: a few steps of a recipe's real path.

    rlvr smoke params/disco_1.5b.yaml [--method disco_logl]

runs, on every rank the recipe's launcher starts, two training steps of each
distinct objective of the recipe's methods (the first method of each; DisCO's
at the recipe's `sequences_per_call`, its scores gathered over the ranks;
SIREN's with its anchor; `--method` runs one) with the recipe's model and
settings: vLLM rollouts, sleep and wake around each update, the weight push,
the grader pool, a validation pass per step, a checkpoint, and a second
trainer that resumes from it. The screen shows one line per check with what
it saw, and the verdict; the engines' and libraries' own output goes to
smoke.log in the work directory (a failure prints its path and last lines).
It exits 1 if any check failed:

- engine: vLLM started (its executor, the start time)
- grader: the recipe's grader, started from this process, grades each gold
  written as a boxed answer: no timeouts, and right for most
- rewards: the steps' responses were graded (not all timeouts or errors) and,
  with the recipe's model, some were rewarded
- push: after a step the engine's log-probs of a fixed response moved, and
  match the trainer's own to a tolerance (bf16: 0.05 per token)
- memory: each phase's peak on each GPU against rlvr.tools.memory's estimate
- validation, resume: a validation score each step; the second trainer
  resumed at step 1 and the step log holds steps 1 and 2
- phases: the time of each phase of each step

What it changes in the recipe, and why, is in SMOKE: one question per rank
per step (a step's memory does not depend on how many), two steps, and a
learning rate of 1e-4, so that one step moves the bf16 weights the engine
serves (the recipes' 1e-6 moves few of them past bf16's rounding in a step).
Without CUDA the model is a tiny one of the recipe's architecture at
rlvr.tools.dryrun's sizes, taught to answer one-digit additions in the recipe's
answer form (rlvr.tools.tiny_policy) and trained on them, so that rewards are not
all 0 and step 1's real update moves the engine's log-probs (CI runs this).
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import shutil
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from rlvr.settings.load import read_yaml
from rlvr.tools.smoke_checks import Report, check_grader, check_rows, train_and_resume

SMOKE = {"steps": 2, "eval_every": 1, "checkpoint_every": 1, "lr": 1e-4, "warmup_steps": 0}
# Without CUDA: the tiny model is taught to answer one-digit additions in the recipe's answer form
# (rlvr.tools.tiny_policy), trained on them, 8 responses a question, so that its groups hold right and wrong ones.
CPU_TASK = {"train_sets": ["arithmetic"], "arithmetic": {"levels": [1], "n_train": 200, "n_test_per_level": 2}}
CPU_QUESTIONS = 4  # a step's questions per rank without CUDA: one of them, at least, holds a right answer
TAUGHT = "taught"  # beside the tiny model: it answers (its last supervised loss)
LOG = "smoke.log"  # in the work directory: the engines' and libraries' own output


def smoke_recipe(recipe: dict, cuda: bool, model_dir: Path | None, work: Path) -> dict:
    """The recipe as the smoke runs it: SMOKE's changes on a GPU node; rlvr.tools.dryrun's
    sizes (one rank) and a tiny model without CUDA."""
    from rlvr.settings.methods import parse_recipe
    from rlvr.settings.prompt import DATASET_SYSTEM
    from rlvr.settings.train import TrainParams
    from rlvr.tools import dryrun

    raw = dryrun.sized(recipe, model_dir, work) if not cuda else copy.deepcopy(recipe)
    if not cuda:
        raw["data"].update(copy.deepcopy(CPU_TASK))
        raw["train"]["responses_per_question"] = 8
        train_prompt = raw.setdefault("prompt", {}).setdefault("train", {}) or {}
        if train_prompt.get("system") == DATASET_SYSTEM:  # SIREN's: the set's own turn, which arithmetic has not
            train_prompt["system"] = raw["prompt"].get("system") or ""
    world = parse_recipe(raw).launcher.world
    train = raw.setdefault("train", {})
    train.update(SMOKE)
    per_rank = 1 if cuda else CPU_QUESTIONS
    train.update(questions_per_step=world * per_rank, mini_batch_questions=world * per_rank)
    for entry in raw.get("methods", {}).values():  # a method may override them
        for key in ("questions_per_step", "mini_batch_questions", "steps", "lr", "eval_every"):
            (entry or {}).pop(key, None)
    for section in (train, *(e for e in raw.get("methods", {}).values() if e)):
        if section.get("sequences_per_call"):  # a rank's mini-batch is one question's responses now
            responses = section.get("responses_per_question", train.get("responses_per_question",
                                                                         TrainParams.responses_per_question))
            section["sequences_per_call"] = math.gcd(section["sequences_per_call"], responses)  # within one question
    raw["data"].update(out_dir=str(work / "data"), validation_size=max(2, world))
    raw["model"]["out_dir"] = str(work / "models" / "base")
    raw["validation"] = {**raw.get("validation", {}), "k": 2}
    return raw


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("recipe", type=Path)
    ap.add_argument("--method", help="the one method to run (default: the first method of each objective)")
    ap.add_argument("--work", type=Path, default=Path("runs/smoke"), help="where its data, model and run go")
    ap.add_argument("--tokenizer", default="models/base", help="without CUDA: an offline tokenizer for the tiny model")
    args = ap.parse_args(argv)
    import torch

    from rlvr.schema import ConfigError
    from rlvr.settings.methods import method_config, parse_recipe
    from rlvr.training.launch import relaunch, under_launcher

    cuda = torch.cuda.is_available()
    recipe = read_yaml(args.recipe)
    work = (args.work / args.recipe.stem).resolve()
    first = not under_launcher()  # the command itself, before any relaunch: it starts the log afresh
    if first:
        (work / LOG).unlink(missing_ok=True)
    try:
        tiny = None
        if not cuda:
            tiny = work / "tiny"
            if first and not (tiny / TAUGHT).exists():
                with output_to(work / LOG):
                    build_tiny_policy(recipe, args.tokenizer, tiny, work)
        params = parse_recipe(smoke_recipe(recipe, cuda, tiny, work))
        methods = [method_config(params, name) for name in smoke_methods(params, args.method)]
        relaunch(params, [str(Path(__file__).resolve()), *(argv if argv is not None else sys.argv[1:])])
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return run_smoke(params, methods, work, tiny=not cuda, source=recipe["model"]["source"])


def build_tiny_policy(recipe: dict, tokenizer: str, tiny: Path, work: Path) -> None:
    """A tiny model of the recipe's architecture, taught to answer in its answer form (rlvr.tools.tiny_policy)."""
    from rlvr.settings.methods import parse_recipe
    from rlvr.tools.dryrun import architecture, tiny_model
    from rlvr.tools.tiny_policy import teach

    tiny_model(architecture(recipe["model"]["source"]), tokenizer, tiny)
    prompt = parse_recipe(smoke_recipe(recipe, False, tiny, work)).prompt.for_training()
    (tiny / TAUGHT).write_text(f"{teach(tiny, prompt):.4f}\n")


def smoke_methods(params, only: str | None) -> list[str]:
    """`only`, or the first method of each distinct objective of the recipe."""
    from rlvr.schema import ConfigError, unknown_name

    methods = params.methods
    if only is not None:
        if only not in methods:
            raise ConfigError([unknown_name("--method", only, sorted(methods))])
        return [only]
    first: dict[str, str] = {}
    for name, entry in methods.items():
        first.setdefault(entry.objective, name)
    return list(first.values())


@contextmanager
def output_to(log: Path):
    """Everything written to this process's stdout and stderr (C libraries too) goes to
    `log`; yields the screen (the original stdout) for the report's lines."""
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    screen = os.fdopen(os.dup(1), "w", buffering=1)
    with open(log, "ab") as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
    try:
        yield screen
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)
        screen.close()


def run_smoke(params, methods: list, work: Path, tiny: bool, source: str) -> int:
    from rlvr import distributed

    rank = os.environ.get("RANK", "0")
    log = work / (LOG if rank == "0" else f"smoke.rank{rank}.log")
    with output_to(log) as screen:
        ranks = distributed.init(params.launcher.timeout_s)
        report = Report(ranks.main, screen)
        try:
            smoke_checks(params, methods, work, tiny, source, ranks, report)
        except Exception as e:  # noqa: BLE001  a check that could not run is a failure with its cause
            report.check("error", False, f"{type(e).__name__}: {e}")
            import traceback

            traceback.print_exc()
        distributed.barrier()
    if report.failed and ranks.main:
        lines = log.read_text(errors="replace").replace("\r", "\n").splitlines()
        tail = [line for line in lines if line.strip() and "%|" not in line][-20:]  # no progress bars
        print(f"smoke: the log is {log}; its last lines:\n" + "\n".join(f"  {line}" for line in tail), flush=True)
    if ranks.main:
        print(f"smoke: {'all checks passed' if not report.failed else 'FAILED: ' + ', '.join(report.failed)}",
              flush=True)
    return 1 if report.failed else 0


def smoke_checks(params, methods: list, work: Path, tiny: bool, source: str, ranks, report: Report) -> None:
    from transformers import AutoTokenizer

    from rlvr import distributed
    from rlvr.data.prepare import prepare
    from rlvr.model import materialize
    from rlvr.rollout.vllm_engine import RolloutEngine

    first = methods[0]
    model = f"a tiny model of {source}'s architecture, taught to answer" if tiny else source
    report.say(f"smoke: {', '.join(f'{m.name} ({m.objective.objective})' for m in methods)} on {model}, "
               f"{ranks.world} rank(s), {first.train.responses_per_question} responses of up to "
               f"{first.train.max_response_tokens} tokens")
    if ranks.main:
        for m in methods:
            for old in (work / "run" / m.name, work / "models" / m.name):  # an earlier smoke's
                shutil.rmtree(old, ignore_errors=True)
        base = materialize(params.model.source, params.model.out_dir, params.model.dtype)
        prepare(params.data, params.prompt.for_training(), AutoTokenizer.from_pretrained(base))
    distributed.barrier()
    base = str(Path(params.model.out_dir))
    t0 = time.perf_counter()
    engine = RolloutEngine.from_params(base, params.engine, params.model.dtype, seed=params.engine.seed + ranks.rank,
                                       sleep_mode=True)
    report.check("engine", True, f"vLLM {engine.executor}, started in {time.perf_counter() - t0:.0f} s")
    check_grader(params, report)
    for method in methods:
        report.say(f"-- {method.name} ({method.objective.objective})")
        rows, counts = train_and_resume(params, method, base, engine, work, report)
        check_rows(params, method, rows, counts, tiny, report)


if __name__ == "__main__":
    from rlvr.cli import tool

    tool(main)
