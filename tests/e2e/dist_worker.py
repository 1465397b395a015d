"""Run by tests/e2e/test_distributed.py on every rank, under the real DeepSpeed launcher.

  step: one update step per method on fixed rollouts (the same global groups
        on every world size); rank 0 saves the weights and the row. On more
        than one rank, then one real rollout step of grpo in the same job:
        every rank saves its questions and responses (sample_rank<r>.json).
"""

import argparse
import copy
import json
import random
from pathlib import Path

import torch
import yaml

from rlvr import distributed
from rlvr.data.prepare import prepare
from rlvr.rollout.vllm_engine import RolloutEngine
from rlvr.rollout.groups import Group, share_unit
from rlvr.settings.load import parse_params
from rlvr.settings.methods import method_config
from rlvr.training.step_metrics import PhaseTimer
from rlvr.training.trainer import Trainer


def registry_methods() -> dict[str, dict]:
    """Every registered objective with the first example its module declares
    (the contract's), and DisCO at its official gathered grain."""
    from rlvr.objectives.registry import objectives

    methods = {name: {"objective": name, **spec.examples[0]} for name, spec in objectives().items()}
    # the official grain: 2 sequences per call on each of 2 ranks, a group's scores gathered (1 rank: 4)
    methods["disco_gathered"] = {**methods["disco"]}
    return methods


METHODS = registry_methods()
B, N, MINI = 4, 4, 2  # two optimizer steps per rollout step: the second one is off-policy
# An objective whose loss adds up over any cut of a mini-batch (neither whole
# groups nor a per-call term) takes mini-batches of one question: on 2 ranks
# each rank trains half of its responses (CallPlan.shared), cut into
# token-budget calls of one or two; 1 rank makes one call per group. The
# others keep whole-group calls of one question on both world sizes.
BINS = {"max_tokens_per_call": 40}


def cut_anywhere(method: dict) -> bool:
    from rlvr.objectives.registry import objective

    spec = objective(method["objective"])
    needs = spec.params(objective=spec.name, **{k: v for k, v in method.items() if k != "objective"}).needs()
    return not (needs.whole_groups or needs.per_call)


def params_for(root: Path, repo: Path, world: int):
    raw = yaml.safe_load((repo / "params.yaml").read_text())
    raw["data"].update({"out_dir": str(root / "data"), "vendor_dir": str(repo / "data/vendor")})
    raw["data"]["arithmetic"].update({"levels": [1, 2], "n_train": 40, "n_test_per_level": 2,
                                       "n_validation_per_level": 0})
    raw["engine"].update({"kv_cache_gib": 1, "max_model_len": 40})  # validation's longest sequence (the budget's floor)
    for section in ("eval", "validation"):  # the suite's budget: the default's own 80 tokens cost 2.5x the time here
        raw[section]["max_new_tokens"] = 32
    raw["launcher"].update({"kind": "deepspeed" if world > 1 else "python", "procs_per_node": world})
    raw["train"].update({"steps": 1, "questions_per_step": B, "responses_per_question": N,
                         "mini_batch_questions": MINI, "micro_batch_questions": 1, "max_response_tokens": 12,
                         "lr": 1e-4, "bf16": False, "zero_stage": 0})
    raw["methods"] = {name: {**m, **({"mini_batch_questions": 1, **(BINS if world > 1 else {})}
                                     if cut_anywhere(m) else {})}
                      for name, m in METHODS.items()}
    raw["methods"]["disco_gathered"]["sequences_per_call"] = N // world
    return parse_params(raw)


def fixed_groups(tokenizer, records) -> list[Group]:
    """B groups with a reward signal in each, identical on every rank and world size."""
    rng = random.Random(0)
    groups = []
    for q, rec in enumerate(records[:B]):
        prompt = tokenizer(rec.problem)["input_ids"]
        responses = [[rng.randrange(100, 5000) for _ in range(rng.randint(3, 12))] for _ in range(N)]
        correct = [i <= q % (N - 1) for i in range(N)]  # 1..N-1 correct: never all equal
        groups.append(Group(rec, prompt, responses, [len(r) == 12 for r in responses],
                            [float(c) for c in correct], correct))
    return groups


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["step"])
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--repo", required=True)
    args = ap.parse_args()
    ranks = distributed.ranks_from_env()
    out = Path(args.out)
    params = params_for(out, Path(args.repo), ranks.world)
    if ranks.main:
        prepare(params.data)
    distributed.init(60)
    distributed.barrier()
    vllm = RolloutEngine(args.model, dtype="float32", max_model_len=512, kv_cache_gib=1, seed=ranks.rank,
                         sleep_mode=True)  # the GPU sequence: asleep during the update, woken by the push
    for name in METHODS:
        tr = trainer(params, name, args.model, out, ranks, vllm)
        unit = share_unit(tr.settings, ranks.world)
        mine = ranks.share(fixed_groups(tr.tokenizer, tr.sampler.records), unit)
        row = tr.step(0, groups=copy.deepcopy(mine))
        if ranks.main:
            weights = torch.cat([p.detach().flatten() for p in tr.ds_engine.module.parameters()])
            torch.save({"weights": weights, "row": row}, out / f"{name}_w{ranks.world}.pt")
        tr.verifier.close()
        distributed.barrier()
    if ranks.world > 1:  # after the updates, so that sampling moves none of their generators
        tr = trainer(params, "grpo", args.model, out / "sample", ranks, vllm)
        got = tr.collector.collect(PhaseTimer()).groups
        (out / f"sample_rank{ranks.rank}.json").write_text(json.dumps(
            {"ids": [g.record.id for g in got], "responses": [g.responses for g in got], "executor": vllm.executor}))
        tr.verifier.close()
        distributed.barrier()


def trainer(params, name: str, model: str, out: Path, ranks, vllm) -> Trainer:
    tr = Trainer(params, method_config(params, name), model, out / name / f"w{ranks.world}", out / name / "final",
                 rollout_engine=vllm)
    tr.setup()
    return tr


if __name__ == "__main__":
    main()
