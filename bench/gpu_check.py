"""The training side of the paper recipes on one GPU, in one run: JSON lines.

    bash bench/gpu_check.sh            # on a CUDA machine (under 8 minutes on one H200)
    bash bench/gpu_check.sh --cpu      # the same code paths at small sizes (CI runs it)

Needs torch, transformers, DeepSpeed and this package; not vLLM (its CUDA
wheel is too large to carry to a bare machine), so rollouts and the weight
push into vLLM are not covered here: the update a rollout step ends with is.

Checks, one JSON line each:
- env: versions, the device, its memory.
- objective_step: for every distinct objective setting of params/*.yaml and
  of the registered objectives' examples, the
  trainer's update (rlvr.training.update.PolicyUpdate: pi_old pass, loss calls,
  DeepSpeed's optimizer steps; ZeRO-2, bf16 on the GPU) on a tiny Qwen2 with
  the real 152k vocabulary: finite loss, weights moved, time, peak memory.
- lm_head: the chunked LM head (log-probs) and the checkpointed blocks with
  entropy gradients (SIREN's top-p entropy) at the 1.5B shape, against full
  logits on a slice (largest differences), then at a paper-sized call (time,
  peak memory against rlvr.tools.memory's estimate).
- loss_call: one forward and backward of the real 1.5B architecture (random
  weights, gradient checkpointing) at the DisCO 1.5B recipe's largest loss
  call; peak memory against rlvr.tools.memory's estimate.
- checkpoint: rlvr.training.checkpoint's round trip with DeepSpeed, the CUDA RNG included.
- grader_pool: the reward workers started from this CUDA torch process grade
  correctly, with their own address space and limit.

The loss calls are measured with rows as rollouts make them: a left-padded
shorter prompt and responses of unequal lengths (an attention mask is built).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
GIB = 1 << 30


def emit(**row) -> dict:
    print(json.dumps(row), flush=True)
    return row


def peak_gib(device) -> float | None:
    return round(torch.cuda.max_memory_allocated(device) / GIB, 3) if device.type == "cuda" else None


def reset_peak(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def synchronize(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def tiny_qwen2(vocab: int, device, dtype):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=4096,
                      tie_word_embeddings=False)
    torch.manual_seed(0)
    return Qwen2ForCausalLM(cfg).to(dtype)


def synthetic_groups(n_groups: int, n: int, vocab: int, max_len: int, seed: int = 0):
    from rlvr.rollout.groups import Group

    g = torch.Generator().manual_seed(seed)
    out = []
    for q in range(n_groups):
        prompt = torch.randint(10, vocab, (32,), generator=g).tolist()
        lengths = torch.randint(max_len // 4, max_len + 1, (n,), generator=g).tolist()
        responses = [torch.randint(10, vocab, (k,), generator=g).tolist() for k in lengths]
        correct = [(i + q) % 3 == 0 for i in range(n)]
        out.append(Group(None, prompt, responses, [False] * n, [float(c) for c in correct], correct))
    return out


def recipe_methods() -> dict[str, object]:
    """Every distinct (objective, settings) of the recipes, then of the
    registered objectives' examples (an objective no recipe uses yet), by a
    readable name."""
    from rlvr.objectives.registry import examples
    from rlvr.settings.load import load_params
    from rlvr.settings.methods import MethodConfig, method_config
    from rlvr.settings.train import TrainParams

    candidates = [(f"{path.stem}:{name}", method_config(params, name))
                  for path in sorted((ROOT / "params").glob("*.yaml"))
                  for params in [load_params(path)] for name in params.methods]
    candidates += [(f"example:{name}-{i}", MethodConfig(f"{name}-{i}", TrainParams(), hp)) for name, i, hp in examples()]
    seen, out = set(), {}
    for label, m in candidates:
        key = json.dumps(dataclasses.asdict(m.objective), sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            out[label] = m
    return out


def check_objective_steps(device, cpu: bool) -> None:
    import deepspeed

    from rlvr.distributed import Ranks
    from rlvr.objectives.registry import objective
    from rlvr.training.deepspeed_engine import adamw, deepspeed_config
    from rlvr.training.step_metrics import PhaseTimer, StepMetrics
    from rlvr.training.update import PolicyUpdate

    vocab = 151936
    methods = recipe_methods()
    if cpu:  # the code paths, not the recipes: each objective once
        first = {}
        for label, m in methods.items():
            first.setdefault(m.objective.objective, (label, m))
        methods = dict(first.values())
    for label, method in methods.items():
        hp = method.objective
        n, longest = (4, 32 + 16) if cpu else (8, 32 + 256)
        # token-budget calls as the recipes make them: a whole group, or about 3 responses
        budget = n * longest if hp.needs().whole_groups else 3 * longest
        t = dataclasses.replace(method.train, questions_per_step=4, responses_per_question=n,
                                mini_batch_questions=2, max_tokens_per_call=budget,
                                max_response_tokens=longest - 32, bf16=not cpu, zero_stage=0 if cpu else 2,
                                gradient_checkpointing=not cpu, lr=1e-4)
        model = tiny_qwen2(vocab, device, torch.bfloat16 if t.bf16 else torch.float32)
        if t.gradient_checkpointing:
            model.gradient_checkpointing_enable()
        engine, *_ = deepspeed.initialize(model=model, optimizer=adamw(model, t),
                                          config=deepspeed_config(t, 1))
        before = [p.detach().float().clone() for p in engine.module.parameters()]
        # TRPA's scores (and GRPO's optional KL) read a frozen copy of the initial policy on the device
        ref = tiny_qwen2(vocab, device, next(model.parameters()).dtype).to(device).eval().requires_grad_(False) \
            if hp.needs().reference_model else None
        update = PolicyUpdate(engine, objective(hp.objective).loss, hp, t, 0, Ranks(), device, ref_model=ref)
        groups = synthetic_groups(4, t.responses_per_question, vocab, t.max_response_tokens)
        metrics = StepMetrics()
        reset_peak(device)
        t0 = time.perf_counter()
        anchor = update.run(groups, 0, None, metrics, PhaseTimer())
        synchronize(device)
        seconds = time.perf_counter() - t0
        row = metrics.reduce()
        moved = max((p.detach().float() - b).abs().max().item() for p, b in zip(engine.module.parameters(), before))
        finite = all(torch.isfinite(p).all().item() for p in engine.module.parameters())
        ok = row["loss"] == row["loss"] and finite and moved > 0 and row.get("skipped_updates", 0) == 0
        emit(check="objective_step", method=label, objective=hp.objective, ok=ok, loss=row["loss"], kl=row["kl"],
             loss_calls=row["loss_calls"], pad_share=round(1 - row["train_tokens"] / row["train_padded_tokens"], 3),
             max_weight_change=moved, anchor=anchor, seconds=round(seconds, 3), peak_gib=peak_gib(device))
        engine.destroy()  # DeepSpeed keeps references to its engines: free this one before the next
        del engine, model, update, ref
        gc.collect()


def check_lm_head(device, cpu: bool) -> None:
    from rlvr.tools import memory
    from rlvr.training import entropy, policy

    h, vocab = (1536, 151936) if not cpu else (64, 151936)
    dtype = torch.bfloat16 if not cpu else torch.float32
    topp = {"top_p": 0.8, "top_k": 10000}
    g = torch.Generator(device="cpu").manual_seed(0)
    weight = (torch.randn(vocab, h, generator=g) * 0.02).to(device, dtype).requires_grad_()

    def inputs(m):
        hidden = (torch.randn(m, h, generator=g)).to(device, dtype).requires_grad_()
        tokens = torch.randint(0, vocab, (m,), generator=g).to(device)
        return hidden, tokens

    # numerics on a slice: chunked paths against full float32 logits
    hidden, tokens = inputs(256 if not cpu else 96)
    coef = torch.linspace(0.5, 1.5, hidden.shape[0], device=device)
    z = (hidden.float() @ weight.float().T) / 0.6
    ref = {"logp": torch.log_softmax(z, -1).gather(-1, tokens[:, None]).squeeze(-1),
           "topp_entropy": entropy.topp_entropy(z, 1.0, **topp)}
    ref_grad = torch.autograd.grad(((ref["logp"] - 0.5 * ref["topp_entropy"]) * coef).sum(), (hidden, weight))
    blocks = policy._checkpointed_blocks(hidden, weight, tokens, 0.6, ["topp_entropy"], topp)
    grad = torch.autograd.grad(((blocks["logp"] - 0.5 * blocks["topp_entropy"]) * coef).sum(), (hidden, weight))
    chunked = policy._ChunkedHeadLogProb.apply(hidden, weight, tokens, 0.6, 64)
    emit(check="lm_head_numerics", tokens=hidden.shape[0], hidden=h, vocab=vocab, dtype=str(dtype),
         logp_max_diff=(blocks["logp"] - ref["logp"]).abs().max().item(),
         chunked_logp_max_diff=(chunked - ref["logp"]).abs().max().item(),
         topp_entropy_max_diff=(blocks["topp_entropy"] - ref["topp_entropy"]).abs().max().item(),
         grad_hidden_rel=((grad[0].float() - ref_grad[0].float()).norm() / ref_grad[0].float().norm()).item(),
         grad_weight_rel=((grad[1].float() - ref_grad[1].float()).norm() / ref_grad[1].float().norm()).item())
    del z, ref, ref_grad, grad, blocks, chunked

    # a paper-sized call: one group of 8 responses x 8,192 tokens (DisCO 1.5B), 3,072 (SIREN)
    for label, m, names in (("logp, 8 x 8192 tokens", 8 * 8192, []),
                            ("logp + top-p entropy gradient, 8 x 3072 tokens", 8 * 3072, ["topp_entropy"])):
        m = m if not cpu else 512
        hidden, tokens = inputs(m)
        reset_peak(device)
        base = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
        t0 = time.perf_counter()
        if names:
            out = policy._checkpointed_blocks(hidden, weight, tokens, 0.6, names, topp)
            loss = (out["logp"] - 0.5 * out["topp_entropy"]).sum()
        else:
            loss = policy._ChunkedHeadLogProb.apply(hidden, weight, tokens, 0.6, policy._head_rows(vocab)).sum()
        loss.backward()
        synchronize(device)
        seconds = time.perf_counter() - t0
        peak = (torch.cuda.max_memory_allocated(device) - base) / GIB if device.type == "cuda" else None
        estimate = ((6 if names else 3) * memory.HEAD_BLOCK * 4 + 3 * m * h * 4 + vocab * h * 4) / GIB
        emit(check="lm_head", call=label, tokens=m, seconds=round(seconds, 3),
             peak_above_inputs_gib=None if peak is None else round(peak, 3), estimate_gib=round(estimate, 3))
        hidden.grad = weight.grad = None
        del hidden, tokens, loss


# The largest loss calls measured on a GPU (the CPU runs the first at a tiny size)
LOSS_CALLS = [("disco_1.5b", "grpo"), ("disco_7b", "disco_logl"), ("disco_8b", "disco_logl"),
              ("siren_qwen2.5-math-7b", "siren")]


def check_loss_call(device, cpu: bool, calls=None) -> None:
    """The largest loss calls of the recipes in LOSS_CALLS through their real
    architectures: the DisCO 1.5B recipe's, DisCO's whole-group calls at 7B
    and 8B, and SIREN 7B's 4,096-token bin with the top-p entropy gradient."""
    for recipe, name in calls or (LOSS_CALLS[:1] if cpu else LOSS_CALLS):
        loss_call(device, cpu, recipe, name)
        gc.collect()
        reset_peak(device)


def loss_call(device, cpu: bool, recipe: str, name: str) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    from rlvr.objectives.base import PolicyBatch
    from rlvr.objectives.registry import objective
    from rlvr.settings.load import load_params
    from rlvr.settings.methods import method_config
    from rlvr.tools import memory, model_shapes
    from rlvr.training.packing import pack
    from rlvr.training.policy import evaluate_tokens

    params = load_params(ROOT / "params" / f"{recipe}.yaml")
    method = method_config(params, name)
    shape = model_shapes.KNOWN_SHAPES[params.model.source]
    t = method.train
    n = memory.loss_call_tokens(method, params) // params.engine.max_model_len  # rows of the widest call
    prompt_len, response_len = params.engine.max_model_len - t.max_response_tokens, t.max_response_tokens
    if cpu:
        shape = dataclasses.replace(shape, hidden=64, layers=2, heads=2, kv_heads=1, intermediate=128)
        n, prompt_len, response_len = 4, 16, 32
    llama = "llama" in params.model.source.lower()
    config, arch = (LlamaConfig, LlamaForCausalLM) if llama else (Qwen2Config, Qwen2ForCausalLM)
    cfg = config(vocab_size=shape.vocab, hidden_size=shape.hidden, intermediate_size=shape.intermediate,
                 num_hidden_layers=shape.layers, num_attention_heads=shape.heads,
                 num_key_value_heads=shape.kv_heads, max_position_embeddings=32768,
                 tie_word_embeddings=shape.tied, torch_dtype="bfloat16")
    torch.manual_seed(0)
    with torch.device(device):
        model = arch(cfg).to(torch.bfloat16 if not cpu else torch.float32)
    model.gradient_checkpointing_enable()
    model.config.use_cache = False
    prompts, responses, size = unequal_rows(n, prompt_len, response_len, shape.vocab)
    packed = pack(prompts, responses, 0, group_size=size).to(device)
    reset_peak(device)
    base = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
    t0 = time.perf_counter()
    hp = method.objective
    needs = hp.needs()
    out = evaluate_tokens(model, packed, t.temperature, entropies=needs.entropies,
                          grad_entropies=needs.grad_entropies, topp={"top_p": needs.topp[0], "top_k": needs.topp[1]})
    batch = PolicyBatch(logp=out["logp"], old_logp=out["logp"].detach(), mask=packed.response_mask,
                        rewards=torch.tensor([float(i % 2) for i in range(n)], device=device), group_size=size,
                        max_response_len=t.max_response_tokens, entropy=out.get("entropy"),
                        topp_entropy=out.get("topp_entropy"), entropy_anchor=1.0)
    objective(hp.objective).loss(batch, hp).loss.backward()
    synchronize(device)
    seconds = time.perf_counter() - t0
    measured = (torch.cuda.max_memory_allocated(device) - base) / GIB if device.type == "cuda" else None
    est = memory.budget(params, method, shape, 80 * GIB)
    grads = shape.params * 2 / GIB  # a plain backward keeps bf16 gradients (DeepSpeed buckets and shards them)
    emit(check="loss_call", recipe=recipe, method=name, model=f"{params.model.source} shape" if not cpu else f"tiny {arch.__name__}",
         rows=n, width=packed.input_ids.shape[1], tokens=int(packed.attention_mask.sum()), seconds=round(seconds, 3),
         peak_above_weights_gib=None if measured is None else round(measured, 3),
         estimate_activations_and_head_gib=round((est["update"]["activations"] + est["update"]["LM head"]) / GIB, 3),
         plain_backward_gradients_gib=round(grads, 3))


def unequal_rows(n: int, prompt_len: int, response_len: int, vocab: int):
    """A loss call's rows as rollouts make them: two groups (one for n < 4) whose
    prompts differ in length, so the shorter is left-padded, and responses of
    unequal lengths, the first at the full length so the call is as wide as the
    estimate's; an attention mask is built, as in training. (prompts, responses,
    group size)."""
    g = torch.Generator().manual_seed(1)
    groups = 2 if n >= 4 else 1
    size = n // groups
    prompts = [p for q in range(groups)
               for p in [torch.randint(10, vocab, (prompt_len if q == 0 else prompt_len // 2,), generator=g).tolist()]
               * size]
    lengths = [response_len] + torch.randint(response_len // 4, response_len + 1, (n - 1,), generator=g).tolist()
    return prompts, [torch.randint(10, vocab, (k,), generator=g).tolist() for k in lengths], size


def check_grader_pool(device, cpu: bool) -> None:
    """The reward workers started from this process, which has CUDA torch loaded
    (gigabytes of address space: workers that inherited it could not import
    math-verify under their limit, and every reward was 0): every correct answer
    graded correct, no timeouts, and the workers' own size and limit."""
    from rlvr.grading.pool import Verifier
    from rlvr.grading.worker import address_space_bytes

    groups = [([str(a * b)], [f"so the product is \\boxed{{{a * b}}}", f"\\boxed{{{a * b + 1}}}"])
              for a in range(2, 12) for b in range(3, 7)]
    t0 = time.perf_counter()
    with Verifier(workers=4, timeout_s=5, group_timeout_s=60) as v:
        grades = v.grade(groups)
        info, counts = v.worker_info[0], v.counts.summary()
    right = sum(g.items[0].correct and not g.items[1].correct for g in grades)
    emit(check="grader_pool", ok=right == len(groups) and counts["timeouts"] == counts["errors"] == 0,
         groups=len(groups), graded_right=right, **counts, seconds=round(time.perf_counter() - t0, 2),
         caller_address_space_gib=round(address_space_bytes() / GIB, 2),
         worker_address_space_gib=round(info["address_space"] / GIB, 2), worker_limit_gib=round(info["limit"] / GIB, 2),
         worker_imported_torch=info["torch_loaded"])


def check_padding_free(device, cpu: bool) -> None:
    """Padding-free loss calls (train.padding_free) against padded ones on a
    tiny Qwen2 in the attention kernel the trainer would pick: log-probs and
    gradients, unequal lengths; then a 16k-token row's time and memory."""
    from rlvr.training.packing import attention_implementation, pack, pack_flat
    from rlvr.training.policy import evaluate_tokens

    dtype = torch.bfloat16 if not cpu else torch.float32
    attention = attention_implementation(True) or "sdpa"
    model = tiny_qwen2(4096, device, dtype).to(device)
    model.set_attn_implementation(attention)  # the kernel the trainer loads the model with
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(10, 4096, (k,), generator=g).tolist() for k in (33, 33, 70, 12)]
    responses = [torch.randint(10, 4096, (k,), generator=g).tolist() for k in (90, 3, 140, 0)]

    def run(packed):
        model.zero_grad()
        out = evaluate_tokens(model, packed.to(device), 0.6)
        (out["logp"] * packed.response_mask.to(device)).sum().backward()
        return out["logp"].float(), [p.grad.float().clone() for p in model.parameters()]

    padded, padded_grads = run(pack(prompts, responses, 0))
    flat, flat_grads = run(pack_flat(prompts, responses, 0))
    rel = max(((a - b).norm() / b.norm().clamp(min=1e-12)).item() for a, b in zip(flat_grads, padded_grads))
    m = 16384 if not cpu else 512
    rows = [torch.randint(10, 4096, (m // 8,), generator=g).tolist() for _ in range(8)]
    reset_peak(device)
    base = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
    t0 = time.perf_counter()
    run(pack_flat([r[:64] for r in rows], [r[64:] for r in rows], 0))
    synchronize(device)
    emit(check="padding_free", attention=attention, logp_max_diff=(flat - padded).abs().max().item(),
         grad_rel_max=rel, row_tokens=m, row_seconds=round(time.perf_counter() - t0, 3),
         row_peak_gib=round((torch.cuda.max_memory_allocated(device) - base) / GIB, 3)
         if device.type == "cuda" else None)


def check_checkpoint(device, cpu: bool) -> None:
    import deepspeed

    from rlvr.distributed import Ranks
    from rlvr.settings.train import TrainParams
    from rlvr.training import checkpoint
    from rlvr.training.deepspeed_engine import adamw, deepspeed_config

    t = TrainParams(bf16=not cpu, zero_stage=0 if cpu else 2, lr=1e-3)
    model = tiny_qwen2(1000, device, torch.bfloat16 if t.bf16 else torch.float32)
    engine, *_ = deepspeed.initialize(model=model, optimizer=adamw(model, t), config=deepspeed_config(t, 1))
    with tempfile.TemporaryDirectory() as tmp:
        saved = [p.detach().clone() for p in engine.module.parameters()]
        checkpoint.save(engine, Path(tmp) / "ck", {"step": 1}, Ranks())
        draws = (torch.rand(4, device=device), torch.rand(4))
        with torch.no_grad():
            for p in engine.module.parameters():
                p.add_(1.0)
        state = checkpoint.load(engine, Path(tmp) / "ck", Ranks())
        again = (torch.rand(4, device=device), torch.rand(4))
        weights = all(torch.equal(a, b) for a, b in zip(saved, engine.module.parameters()))
    emit(check="checkpoint", ok=weights and torch.equal(draws[0], again[0]) and torch.equal(draws[1], again[1]),
         weights_restored=weights, device_rng_restored=torch.equal(draws[0], again[0]),
         host_rng_restored=torch.equal(draws[1], again[1]), step=state["step"])


CHECKS = {"grader_pool": check_grader_pool, "objective_step": check_objective_steps, "lm_head": check_lm_head,
          "loss_call": check_loss_call, "padding_free": check_padding_free, "checkpoint": check_checkpoint}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpu", action="store_true", help="small sizes on the CPU (CI)")
    ap.add_argument("--only", nargs="*", choices=list(CHECKS), help="run only these checks")
    args = ap.parse_args()
    if not args.cpu and not torch.cuda.is_available():
        print("no CUDA device: run with --cpu for the CPU version", file=sys.stderr)
        return 2
    from rlvr import distributed

    ranks = distributed.init(600)
    device = ranks.device if not args.cpu else torch.device("cpu")
    import deepspeed
    import transformers

    emit(check="env", torch=torch.__version__, transformers=transformers.__version__, deepspeed=deepspeed.__version__,
         device=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
         memory_gib=round(torch.cuda.get_device_properties(device).total_memory / GIB, 1)
         if device.type == "cuda" else None)
    failed = []
    for name, check in CHECKS.items():
        if args.only and name not in args.only:
            continue
        t0 = time.perf_counter()
        try:
            check(device, args.cpu)
        except Exception as e:  # keep going: one JSON line per failure, the others still run
            failed.append(name)
            emit(check=name, ok=False, error=f"{type(e).__name__}: {e}"[:2000])
        emit(check=f"{name}_done", seconds=round(time.perf_counter() - t0, 1))
    distributed.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
