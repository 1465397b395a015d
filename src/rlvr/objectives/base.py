"""What every objective shares: the batch it sees, masked reductions, advantages.

Shapes: N = G * n responses (G questions, n responses each, a question's
responses contiguous), T = padded response length. Every tensor is over
response tokens only; `mask` is 1 for a real token and 0 for padding.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class PolicyBatch:
    logp: torch.Tensor  # [N, T] log pi_theta of the sampled tokens (carries grad)
    old_logp: torch.Tensor  # [N, T] log pi_old, recomputed by the trainer
    mask: torch.Tensor  # [N, T] float, 1 = real response token
    rewards: torch.Tensor  # [N]
    group_size: int  # n
    max_response_len: int = 0  # Dr. GRPO's constant normalizer
    ref_logp: torch.Tensor | None = None  # [N, T] frozen reference (GRPO's optional KL)
    entropy: torch.Tensor | None = None  # [N, T] full-vocabulary entropy (carries grad)
    topp_entropy: torch.Tensor | None = None  # [N, T] SIREN's top-p entropy (carries grad)
    entropy_anchor: float | None = None  # SIREN's H_anchor
    token_norm: float | None = None  # token-mean divisor per loss call (DAPO); None: this batch's own count


@dataclass
class LossOutput:
    loss: torch.Tensor
    # 0-dim detached tensors on the loss's device: the trainer reads them once
    # per step, since reading one (.item()) per loss call is a host sync on a GPU
    metrics: dict[str, torch.Tensor] = field(default_factory=dict)


def masked_sum(x: torch.Tensor, mask: torch.Tensor, dim=None) -> torch.Tensor:
    return (x * mask).sum() if dim is None else (x * mask).sum(dim)


def token_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over every real token of the batch (DAPO's token-level aggregation)."""
    return masked_sum(x, mask) / mask.sum().clamp(min=1)


def seq_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per response: mean over its real tokens ([N]); an empty response gives 0."""
    return masked_sum(x, mask, -1) / mask.sum(-1).clamp(min=1)


def seq_mean_then_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """GRPO's aggregation: mean over a response's tokens, then over responses."""
    return seq_mean(x, mask).mean()


def seq_sum_norm(x: torch.Tensor, mask: torch.Tensor, max_response_len: int) -> torch.Tensor:
    """verl's seq-mean-token-sum-norm (Dr. GRPO, SIREN and its baselines): the sum
    over every real token divided by the constant (number of responses * max
    response length), so a response's weight does not depend on its length and
    padding or masked-out tokens still count in the denominator."""
    if max_response_len <= 0:
        raise ValueError("seq-mean-token-sum-norm needs max_response_len > 0")
    return masked_sum(x, mask) / (x.shape[0] * max_response_len)


def group_advantages(rewards: torch.Tensor, n: int, scale: bool = True, eps: float = 1e-6) -> torch.Tensor:
    """A_i = r_i - mean_group(r), divided by (std_group(r) + eps) when `scale`.

    std is the sample std (n - 1), as in GRPO's reference code. A group whose
    rewards are all equal gets A = 0 for every member.
    """
    g = rewards.float().view(-1, n)
    centered = g - g.mean(dim=1, keepdim=True)
    if scale:
        std = g.std(dim=1, keepdim=True)
        # an all-equal group is 0 / 0: define it as 0 whatever eps is
        centered = torch.where(std > 0, centered / (std + eps), torch.zeros_like(centered))
    return centered.reshape(-1)


def clipped_policy_loss(logp, old_logp, adv, clip_low: float, clip_high: float, dual_clip: float | None = None):
    """Per-token PPO-clip loss -min(rho A, clip(rho, 1-cl, 1+ch) A) ([N, T]), and
    which tokens were clipped. With `dual_clip` c, a negative-advantage token's
    loss is capped at -c A (the dual-clip PPO bound). `adv` is per response ([N])
    or per token ([N, T], e.g. an entropy-shaped advantage)."""
    ratio = torch.exp(logp - old_logp)
    a = adv if adv.dim() == logp.dim() else adv.unsqueeze(-1)
    unclipped = -ratio * a
    clipped = -torch.clamp(ratio, 1 - clip_low, 1 + clip_high) * a
    loss = torch.maximum(unclipped, clipped)
    was_clipped = clipped > unclipped
    if dual_clip is not None:
        cap = -dual_clip * a
        capped = (a < 0) & (loss > cap)
        loss = torch.where(a < 0, torch.minimum(loss, cap), loss)
        was_clipped = was_clipped | capped
    return loss, was_clipped


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """The k3 estimator of KL(pi || ref) per token: exp(ref - logp) - (ref - logp) - 1."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1


def policy_kl(logp, old_logp, mask, estimator: str = "kl") -> torch.Tensor:
    """KL(pi_old || pi_theta) over all real tokens, DisCO's constraint.

    'kl': mean of (log p_old - log p); 'low_var_kl': mean of (rho - 1) - log rho.
    """
    if estimator == "kl":
        per_token = old_logp - logp
    elif estimator == "low_var_kl":
        log_rho = logp - old_logp
        per_token = torch.exp(log_rho) - 1 - log_rho
    else:
        raise ValueError(f"kl_estimator must be 'kl' or 'low_var_kl', got '{estimator}'")
    return token_mean(per_token, mask)
