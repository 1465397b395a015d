"""Per-GPU memory of a recipe, estimated from the model's shape and the params.

    rlvr memory params/disco_1.5b.yaml            # 80 GB GPUs (79.2 GiB reported)

prints, for every method of the recipe, what one GPU holds in its two phases:
the rollout (the trainer's resident state beside vLLM's share) and the update
(the resident state, the largest loss call's activations and LM-head blocks,
vLLM asleep). The train stage runs the same check on the real GPU before it
starts, and stops with the setting to change when a recipe cannot fit.

The numbers are estimates, worst case: every response of the largest loss
call at the maximum length. What each line counts is written beside it;
bench/gpu_check.sh measures a loss call of the 1.5B shape against it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rlvr.schema import ConfigError
from rlvr.settings.buffers import HEAD_BLOCK_LOGITS, REDUCE_BUCKET
from rlvr.settings.call_plan import CallPlan
from rlvr.settings.load import load_params
from rlvr.settings.methods import MethodConfig, check_methods, method_config
from rlvr.settings.sections import Params
from rlvr.tools.model_shapes import ModelShape, model_shape

GIB = 1 << 30
GPU_80GB_GIB = 79.2  # what torch.cuda.get_device_properties reports for an "80 GB" A100 or H100


# The recipes' models, from each one's config.json on the hub.


# Fixed costs, in bytes.
CUDA_OVERHEAD = 3 * GIB  # CUDA contexts (the trainer's and vLLM's), allocator slack
# One multi-rank NCCL communicator's buffers, worst case: with NVLS (NVLink SHARP, on by default
# on H100/H200 SXM nodes) an 8-rank communicator can take about 1 GiB. A job of several ranks
# holds two per GPU, both made before vLLM's memory snapshot, so outside gpu_memory_utilization:
# DeepSpeed's world group and, under the external launcher, vLLM's data-parallel group of every
# rank (its one-rank tensor- and pipeline-parallel groups make no communicator). NCCL_NVLS_ENABLE=0
# takes the NVLS part away at some all-reduce bandwidth.
NCCL_COMMUNICATOR = 1 * GIB
NCCL_COMMUNICATORS = 2
VLLM_ASLEEP = 1 * GIB  # what a sleeping engine keeps (CUDA graph pools, its allocator's slack)
HEAD_BLOCK = HEAD_BLOCK_LOGITS  # float32 logits per LM-head row block on a GPU


def loss_call_rows(method: MethodConfig, params: Params) -> int:
    """Sequences of a loss call sized by count (CallPlan.most_rows)."""
    return CallPlan(method.train, params.launcher.world, method.objective.needs().whole_groups).most_rows


def loss_call_tokens(method: MethodConfig, params: Params) -> int:
    """Tokens of the largest loss call, padding included: the token budget
    (train.max_tokens_per_call), or its sequences as long as the engine admits
    (max_model_len holds prompt and response)."""
    t = method.train
    if t.max_tokens_per_call > 0:
        return t.max_tokens_per_call
    return loss_call_rows(method, params) * params.engine.max_model_len


def loss_call_response_tokens(method: MethodConfig, params: Params) -> int:
    """Response tokens of the largest loss call (at most all of its tokens)."""
    t = method.train
    if t.max_tokens_per_call > 0:
        return t.max_tokens_per_call
    return loss_call_rows(method, params) * t.max_response_tokens


def budget(params: Params, method: MethodConfig, shape: ModelShape, gpu_bytes: float) -> dict:
    """Bytes per GPU, by component, and the two phases' totals."""
    t, world, needs = method.train, params.launcher.world, method.objective.needs()
    b = 2 if t.bf16 else 4
    p = shape.params
    shard = world if t.zero_stage >= 1 else 1
    rows = {
        "weights": p * b / (world if t.zero_stage == 3 else 1) + (2 * shape.layer_params * b if t.zero_stage == 3 else 0),
        # fp32 master copy (bf16 only) + Adam's two moments, sharded by ZeRO >= 1
        "optimizer": (12 if t.bf16 else 8) * p / shard,
        # the fp32 gradient partition (ZeRO >= 2 shards it)
        "gradients": 4 * p / (world if t.zero_stage >= 2 else 1),
        "reference model": p * b if needs.reference_model and not t.ref_offload else 0,
        "NCCL": NCCL_COMMUNICATORS * NCCL_COMMUNICATOR if world > 1 else 0,
        "overhead": CUDA_OVERHEAD,
    }
    resident = sum(rows.values())
    tokens = loss_call_tokens(method, params)
    response_tokens = loss_call_response_tokens(method, params)
    h, i, kv = shape.hidden, shape.intermediate, shape.kv_dim
    # One decoder layer's saved activations per token: bf16 norm outputs, q, k, v,
    # rotated q/k, attention output, MLP gate/up/activation/product, and the two
    # RMSNorms' float32 inputs.
    per_layer = b * (5 * h + 4 * kv + 5 * i) + 2 * 4 * h
    if t.gradient_checkpointing:  # each layer's input kept; one layer recomputed, plus its backward's transients
        activations = shape.layers * tokens * h * b + 1.5 * tokens * per_layer
    else:
        activations = shape.layers * tokens * per_layer
    differentiable = bool(needs.grad_entropies)
    head = ((6 if differentiable else 3) * HEAD_BLOCK * 4  # float32 blocks and their autograd intermediates
            + 3 * response_tokens * h * 4  # response hidden states, their gradient, the float32 log-probs
            + shape.vocab * h * 4)  # the head's float32 gradient accumulator
    # the padded call's boolean attention mask, rows x width^2: largest with the widest rows
    mask = tokens * params.engine.max_model_len
    grad_bytes = 4 if t.float32_gradients else b  # the reduce buckets hold gradients in the reduction dtype
    update = {"buckets": 2 * REDUCE_BUCKET * grad_bytes, "activations": activations, "attention mask": mask,
              "LM head": head, "vLLM asleep": VLLM_ASLEEP}
    if needs.reference_model and t.ref_offload:  # its embeddings, norm and head, and the layer visiting the GPU
        update["reference layer"] = (p - shape.layers * shape.layer_params + shape.layer_params) * b
    rollout = {"vLLM": params.engine.gpu_memory_utilization * gpu_bytes}
    return {"resident": rows, "rollout": rollout, "update": update, "tokens": tokens,
            "resident_total": resident, "rollout_total": resident + sum(rollout.values()),
            "update_total": resident + sum(update.values())}


def problems(params: Params, method: MethodConfig, est: dict, gpu_bytes: float) -> list[str]:
    """What does not fit, each with the setting to change."""
    out, name, gib = [], method.name, gpu_bytes / GIB
    if est["rollout_total"] > gpu_bytes:
        room = (gpu_bytes - est["resident_total"]) / gpu_bytes
        out.append(f"methods.{name}: the rollout needs {est['rollout_total'] / GIB:.1f} GiB of {gib:.1f}: "
                   f"the trainer keeps {est['resident_total'] / GIB:.1f} GiB beside vLLM's share; lower "
                   f"engine.gpu_memory_utilization ({params.engine.gpu_memory_utilization}) to at most "
                   f"{max(room, 0):.2f}, or raise train.zero_stage / the number of ranks")
    if est["update_total"] > gpu_bytes:
        out.append(f"methods.{name}: the update needs {est['update_total'] / GIB:.1f} GiB of {gib:.1f}: its "
                   f"largest loss call holds {est['tokens']:,} tokens ({est['update']['activations'] / GIB:.1f} GiB "
                   f"of activations); {smaller_call(method, params, est, gpu_bytes)}")
    return out


def smaller_call(method: MethodConfig, params: Params, est: dict, gpu_bytes: float) -> str:
    """The setting that sizes the loss call, and the value that would fit (activations scale with its tokens)."""
    t = method.train
    room = gpu_bytes - (est["update_total"] - est["update"]["activations"])
    share = max(room, 0) / est["update"]["activations"]
    if t.max_tokens_per_call > 0:
        fix = f"lower train.max_tokens_per_call ({t.max_tokens_per_call:,}) to about {int(t.max_tokens_per_call * share):,}"
    elif t.sequences_per_call > 0:
        fix = f"lower train.sequences_per_call ({t.sequences_per_call}) to {int(t.sequences_per_call * share)}"
    else:
        fix = f"lower train.micro_batch_questions ({t.micro_batch_questions}) to {int(t.micro_batch_questions * share)}"
    if share < 1 / loss_call_rows(method, params):
        fix = "no loss call of one sequence fits: lower train.max_response_tokens"
    checkpointing = "" if t.gradient_checkpointing else ", or turn on train.gradient_checkpointing"
    return fix + checkpointing


def check(params: Params, gpu_bytes: float, shape: ModelShape | None = None,
          methods: list[MethodConfig] | None = None) -> dict[str, dict]:
    """The methods' budgets (every method of params by default); ConfigError listing every method that cannot fit."""
    shape = shape or model_shape(params)
    found, estimates = [], {}
    for method in methods if methods is not None else check_methods(params).values():
        name = method.name
        estimates[name] = budget(params, method, shape, gpu_bytes)
        found += problems(params, method, estimates[name], gpu_bytes)
    if found:
        raise ConfigError(found, f"memory on a {gpu_bytes / GIB:.1f} GiB GPU")
    return estimates


def check_this_gpu(params: Params, method: MethodConfig) -> None:
    """The train stage's check before any compute, on this node's GPU (no-op
    without CUDA). The estimate is a worst case (every response at the maximum
    length): RLVR_MEMORY_CHECK=warn turns the stop into a warning."""
    import os

    import torch

    if not torch.cuda.is_available() or os.environ.get("RLVR_MEMORY_CHECK") == "off":
        return
    try:
        check(params, torch.cuda.get_device_properties(0).total_memory, methods=[method])  # the stage's own build
    except ConfigError as e:
        if os.environ.get("RLVR_MEMORY_CHECK") != "warn":
            raise ConfigError(e.problems + ["the estimate is a worst case (rlvr memory shows it); "
                                            "RLVR_MEMORY_CHECK=warn goes on anyway"], "memory") from None
        print(f"warning: {e}", file=sys.stderr)


def format_budget(name: str, est: dict, gpu_bytes: float) -> str:
    def line(label, value):
        return f"  {label:<18} {value / GIB:7.1f} GiB"

    lines = [f"{name}: largest loss call {est['tokens']:,} tokens"]
    lines += [line(k, v) for k, v in est["resident"].items() if v]
    lines.append(line("= resident", est["resident_total"]))
    lines += [line(k, v) for k, v in est["rollout"].items()]
    lines.append(line("rollout peak", est["rollout_total"]) + f"  ({est['rollout_total'] / gpu_bytes:.0%})")
    lines += [line(k, v) for k, v in est["update"].items()]
    lines.append(line("update peak", est["update_total"]) + f"  ({est['update_total'] / gpu_bytes:.0%})")
    return "\n".join(lines)


TABLE_GPUS = {"80 GB": GPU_80GB_GIB, "141 GB": 140.0}  # columns of recipe_table: name, GiB the GPU reports


def recipe_table(paths: list[Path]) -> str:
    """The recipes' budgets as the markdown table docs/gpu.md shows (a test
    keeps the two equal): the largest of each phase over a recipe's methods,
    and the methods that do not fit each GPU."""
    names = list(TABLE_GPUS)
    rows = ["| recipe | model | loss call (tokens) | resident | rollout peak, " + " / ".join(names)
            + " | update peak | " + " | ".join(names) + " |", "|---" * (6 + len(names)) + "|"]
    for path in paths:
        params = load_params(path)
        if not params.methods:
            continue
        shape = model_shape(params)
        methods = [method_config(params, m) for m in params.methods]
        est = {gib: [budget(params, m, shape, gib * GIB) for m in methods] for gib in TABLE_GPUS.values()}
        first = est[GPU_80GB_GIB]
        tokens = sorted({e["tokens"] for e in first})
        rollout = " / ".join(f"{max(e['rollout_total'] for e in est[g]) / GIB:.1f}" for g in TABLE_GPUS.values())
        verdicts = []
        for gib in TABLE_GPUS.values():
            out = [m.name for m, e in zip(methods, est[gib]) if problems(params, m, e, gib * GIB)]
            verdicts.append(f"**no**: {', '.join(out)}" if out else "fits")
        rows.append(f"| `{path.name}` | {shape.params / 1e9:.2f}B | {' / '.join(f'{t:,}' for t in tokens)} | "
                    f"{max(e['resident_total'] for e in first) / GIB:.1f} | {rollout} | "
                    f"{max(e['update_total'] for e in first) / GIB:.1f} | {' | '.join(verdicts)} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("params", nargs="?", default="params.yaml")
    ap.add_argument("--gpu-gib", type=float, default=GPU_80GB_GIB,
                    help=f"GPU memory in GiB, as the GPU reports it (default {GPU_80GB_GIB}: an 80 GB A100 or H100)")
    ap.add_argument("--table", nargs="*", type=Path, metavar="RECIPE",
                    help="print the recipes' table (GiB) instead, as docs/gpu.md shows it (default: params/*.yaml)")
    args = ap.parse_args(argv)
    if args.table is not None:
        print(recipe_table(args.table or sorted(Path("params").glob("*.yaml"))))
        return 0
    gpu = args.gpu_gib * GIB
    try:
        params = load_params(args.params)
        shape = model_shape(params)
        methods = list(params.methods)
        print(f"{args.params}: {params.model.source}, {shape.params / 1e9:.2f}B parameters, "
              f"{params.launcher.world} rank(s), {args.gpu_gib:g} GiB per GPU")
        failed, shown = [], {}
        for name in methods:
            method = method_config(params, name)
            est = budget(params, method, shape, gpu)
            shown.setdefault((est["rollout_total"], est["update_total"]), (est, []))[1].append(name)
            failed += problems(params, method, est, gpu)
        for est, names in shown.values():  # methods with the same needs share one breakdown
            print(format_budget(", ".join(names), est, gpu))
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if failed:
        print(ConfigError(failed, f"does not fit {args.gpu_gib:g} GiB"), file=sys.stderr)
        return 1
    print(f"fits: every method within {args.gpu_gib:g} GiB per GPU")
    return 0


if __name__ == "__main__":
    from rlvr.cli import tool

    tool(main)
