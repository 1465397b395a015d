"""The GRPO family: GRPO, GRPO_RW, GRPO with an entropy bonus, Dr. GRPO, DAPO."""

from __future__ import annotations

import torch

from rlvr.objectives.base import (
    LossOutput,
    PolicyBatch,
    advantages,
    clipped_policy_loss,
    k3_kl,
    masked_sum,
    seq_mean_then_mean,
    seq_sum_norm,
    token_mean,
)


def _stats(batch: PolicyBatch, clipped: torch.Tensor) -> dict[str, torch.Tensor]:
    return {"clip_frac": token_mean(clipped.float(), batch.mask).detach()}


def grpo(batch: PolicyBatch, hp) -> LossOutput:
    """Group-normalized advantages, PPO clip, sequence-mean then batch-mean,
    optional k3 KL to a frozen reference (kl_coef)."""
    adv = advantages(batch, scale=True, eps=hp.adv_eps)
    per_token, clipped = clipped_policy_loss(batch.logp, batch.old_logp, adv, hp.clip_low, hp.clip_high,
                                             dual_clip=hp.dual_clip)
    loss = seq_mean_then_mean(per_token, batch.mask, batch.total_responses)
    metrics = _stats(batch, clipped)
    if hp.kl_coef > 0:
        if batch.ref_logp is None:
            raise ValueError("grpo with kl_coef > 0 needs reference log-probs (ref_logp)")
        kl = seq_mean_then_mean(k3_kl(batch.logp, batch.ref_logp), batch.mask, batch.total_responses)
        loss = loss + hp.kl_coef * kl
        metrics["kl_ref"] = kl.detach()
    return LossOutput(loss, metrics)


def reweighted_advantages(rewards: torch.Tensor, n: int) -> torch.Tensor:
    """row_reweighted_advantages for whole groups (a group's rows contiguous)."""
    return row_reweighted_advantages(rewards, rewards.view(-1, n).repeat_interleave(n, dim=0))


def row_reweighted_advantages(rewards: torch.Tensor, group_rows: torch.Tensor) -> torch.Tensor:
    """GRPO_RW's advantages: (r_i - p) / (p (1 - p)) per group, p the group's
    accuracy (rewards read as correct when > 0.5); 0 for an all-equal group.
    `group_rows` [N, n]: each row's group's rewards.

    For binary rewards GRPO's (r_i - p) / sqrt(p (1 - p)) weighs each question
    by omega(p) = sqrt(p (1 - p)) relative to this (DisCO, Proposition 1):
    dividing once more by that weight removes the difficulty bias. A correct
    response gets +1/p, a wrong one -1/(1 - p)."""
    correct = (rewards > 0.5).float()
    p = (group_rows > 0.5).float().mean(dim=1)
    var = p * (1 - p)
    return torch.where(var > 0, (correct - p) / var.clamp(min=1e-12), torch.zeros_like(correct))


def grpo_rw(batch: PolicyBatch, hp) -> LossOutput:
    """GRPO with the question-level weight removed (DisCO's difficulty-bias
    ablation): reweighted advantages, PPO clip and aggregation as grpo."""
    adv = row_reweighted_advantages(batch.rewards, batch.group_rows())
    per_token, clipped = clipped_policy_loss(batch.logp, batch.old_logp, adv, hp.clip_low, hp.clip_high,
                                             dual_clip=hp.dual_clip)
    return LossOutput(seq_mean_then_mean(per_token, batch.mask, batch.total_responses), _stats(batch, clipped))


def grpo_er(batch: PolicyBatch, hp) -> LossOutput:
    """GRPO minus entropy_coef * mean token entropy (full vocabulary; the mean
    over the mini-batch's real tokens)."""
    if batch.entropy is None:
        raise ValueError("grpo_er needs the full-vocabulary token entropy (entropy)")
    out = grpo(batch, hp)
    ent = masked_sum(batch.entropy, batch.mask) / batch.total_tokens
    out.loss = out.loss - hp.entropy_coef * ent
    out.metrics["entropy_bonus"] = ent.detach()
    return out


def dr_grpo(batch: PolicyBatch, hp) -> LossOutput:
    """Advantages without the std division; token losses summed and divided by
    the constant (number of responses * max response length). No KL. With
    dual_clip (SIREN's runs: 3, always on in verl's policy loss) negative
    advantages are capped."""
    if batch.max_response_len <= 0:
        raise ValueError("dr_grpo needs max_response_len > 0")
    adv = advantages(batch, scale=False)
    per_token, clipped = clipped_policy_loss(batch.logp, batch.old_logp, adv, hp.clip_low, hp.clip_high,
                                             dual_clip=hp.dual_clip)
    loss = seq_sum_norm(per_token, batch.mask, batch.max_response_len, batch.total_responses)
    return LossOutput(loss, _stats(batch, clipped))


def dapo(batch: PolicyBatch, hp) -> LossOutput:
    """Clip-higher (1 - clip_low, 1 + clip_high), dual clip (verl's DAPO recipe:
    c = 10), token-level aggregation, no KL.

    Token level means one division for the whole mini-batch: the summed token
    losses over the number of real tokens of every call on every rank
    (`batch.total_tokens`), so the calls add up to the mini-batch's token mean.
    Dynamic sampling and overlong shaping act on the rollouts (rlvr.groups)."""
    adv = advantages(batch, scale=True, eps=hp.adv_eps)
    per_token, clipped = clipped_policy_loss(batch.logp, batch.old_logp, adv, hp.clip_low, hp.clip_high,
                                             dual_clip=hp.dual_clip)
    return LossOutput(masked_sum(per_token, batch.mask) / batch.total_tokens, _stats(batch, clipped))
