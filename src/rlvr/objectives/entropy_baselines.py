"""The entropy baselines of SIREN's table, as SIREN's official code runs them.

Source: Linn3a/siren, verl/verl/workers/actor/dp_actor.py (update_policy, one
branch per `experiment_type`) and verl/verl/trainer/ppo/core_algos.py; the
papers are Cui et al. 2025 (Clip-Cov, KL-Cov), Cheng et al. 2025 (Entropy-Adv)
and Wang et al. 2025 (80/20 forking tokens).

Shared by all five (SIREN's setting, exp_scripts/siren.sh):
- Dr. GRPO advantages A_i = r_i - mean_group(r) (norm_adv_by_std_in_grpo=False).
- rho_it = exp(log p_it - log p_old_it); PPO clip [1 - clip_low, 1 + clip_high]
  (0.2 / 0.2 effective in the official runs); the dual clip c = hp.dual_clip
  (3.0 in the official runs, where it is always on) where the official loss
  function applies it.
- Aggregation seq-mean-token-sum-norm: sum over the tokens that carry a loss /
  (N responses * max_response_len); tokens a method drops still count in the
  denominator (base.seq_sum_norm).
- "Batch" means the tensors of one loss call. In the official code that is one
  micro-batch (under dynamic batch size a 4096-token, length-balanced bin of
  responses, not group-aware), as it is here with `train.max_tokens_per_call`.
  Covariance centring and token budgets (Clip-Cov, KL-Cov) and the 80/20
  batch quantile are computed per call; the aggregation's denominator is the
  mini-batch's (batch.total_responses).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch

from rlvr.objectives.base import (
    LossOutput,
    Needs,
    ObjectiveParams,
    PolicyBatch,
    PolicyTermParams,
    advantages,
    check_choice,
    clipped_policy_loss,
    policy_term,
    seq_sum_norm,
    token_mean,
)
from rlvr.objectives.registry import register
from rlvr.objectives.siren import peak_entropy_mask

ENTROPY = frozenset({"entropy"})


def _need_entropy(batch: PolicyBatch, name: str) -> torch.Tensor:
    if batch.entropy is None:
        raise ValueError(f"{name} needs the full-vocabulary token entropy (entropy)")
    return batch.entropy


def _frac(selected: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return token_mean(selected.float(), mask).detach()


def token_covariance(adv: torch.Tensor, logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Cui et al.'s per-token covariance term ([N, T], no gradient):

        cov_it = (A_i - mean(A)) * (log p_it - mean(log p)),

    both means over every real token of the batch (a response's advantage
    counts once per real token). Padding is set to -inf so it is never selected.
    """
    with torch.no_grad():
        a = adv.unsqueeze(-1).expand_as(logp).float()
        lp = logp.detach().float()
        cov = (a - token_mean(a, mask)) * (lp - token_mean(lp, mask))
        return cov.masked_fill(mask <= 0, float("-inf"))


def batch_seed(batch: PolicyBatch) -> int:
    """A seed that is a function of the batch alone (old log-probs, mask, rewards),
    so a random choice made from it is reproducible and the objective stays pure."""
    h = hashlib.blake2b(digest_size=8)
    for t in (batch.old_logp, batch.mask, batch.rewards):
        h.update(t.detach().float().contiguous().cpu().numpy().tobytes())
    return int.from_bytes(h.digest(), "little") & ((1 << 63) - 1)


@dataclass
class EntropyRegParams(PolicyTermParams):
    entropy_coef: float = 0.0  # weight of the entropy bonus (official: 0.005)

    def needs(self) -> Needs:
        return Needs(entropies=ENTROPY, grad_entropies=ENTROPY)


@register("entropy_reg", EntropyRegParams)
def entropy_reg(batch: PolicyBatch, hp: EntropyRegParams) -> LossOutput:
    """Naive entropy regularization (experiment_type 'naive_entropy_reg', use_siren=False).

        loss = P - entropy_coef * sum_{i,t} m_it H_it / (N * max_response_len)

    P is Dr. GRPO's policy term: -min(rho A, clip(rho) A), dual clip c = hp.dual_clip
    for A < 0, aggregated seq-mean-token-sum-norm. H is the FULL-vocabulary token
    entropy of the current policy (logits / rollout temperature) and carries gradient;
    the bonus uses the same aggregation as the policy term (the official
    entropy_agg_mode is set to loss_agg_mode for 'naive*' types). Official
    coefficient: the script's entropy_coeff = 0.005.
    """
    h = _need_entropy(batch, "entropy_reg")
    policy, metrics = policy_term(batch, advantages(batch, scale=False), hp, "seq-mean-token-sum-norm")
    bonus = seq_sum_norm(h, batch.mask, batch.max_response_len, batch.total_responses)
    return LossOutput(policy - hp.entropy_coef * bonus, {**metrics, "entropy_bonus": bonus.detach()})


@dataclass
class ClipCovParams(PolicyTermParams):
    cov_clip_ratio: float = 2e-4  # share of real tokens detached (at least 1), drawn from the band
    cov_clip_bounds_low: float = 1.0  # the band: cov > low (strict)
    cov_clip_bounds_high: float = 5.0  # the band: cov < high (strict)


@register("clip_cov", ClipCovParams)
def clip_cov(batch: PolicyBatch, hp: ClipCovParams, generator: torch.Generator | None = None) -> LossOutput:
    """Clip-Cov (Cui et al.; core_algos.compute_policy_loss_clip_cov).

    1. Per-token PPO loss l_it = max(-rho A, -clip(rho, 1-clip_low, 1+clip_high) A)
       (no dual clip: the official Clip-Cov loss has none).
    2. cov_it = token_covariance(A, log p) (means over the batch's real tokens).
    3. Candidates: real tokens NOT already clipped by the PPO clip (-clip(rho) A >
       -rho A) with cov_clip_bounds_low < cov_it < cov_clip_bounds_high (strict).
    4. Budget k = max(int(cov_clip_ratio * #real tokens), 1); choose min(k, #candidates)
       candidates uniformly at random without replacement.
    5. Selected tokens are detached: their loss is multiplied by 0 (no value, no
       gradient), but they stay in the denominator N * max_response_len.

    Randomness: the official code draws `torch.randperm(len(candidates))` from the
    global, unseeded torch RNG. Here the permutation comes from `generator` or, when
    none is given, from a CPU generator seeded with batch_seed(batch), so the same
    batch always selects the same tokens. No draw is made when every candidate fits.
    Official values: ratio 2e-4, band (1, 5), PPO clip 0.2 (SIREN); Cui et al.'s own
    Clip-Cov scripts use clip_ratio_low/high = 1 instead.
    """
    adv = advantages(batch, scale=False)
    per_token, clipped = clipped_policy_loss(batch.logp, batch.old_logp, adv, hp.clip_low, hp.clip_high)
    real = batch.mask > 0
    cov = token_covariance(adv, batch.logp, batch.mask)
    band = real & ~clipped & (cov > hp.cov_clip_bounds_low) & (cov < hp.cov_clip_bounds_high)
    budget = max(int(hp.cov_clip_ratio * int(real.sum())), 1)
    cand = band.nonzero()
    if len(cand) > budget:
        if generator is None:
            generator = torch.Generator().manual_seed(batch_seed(batch))
        perm = torch.randperm(len(cand), generator=generator)[:budget]
        cand = cand[perm.to(cand.device)]
    selected = torch.zeros_like(real)
    selected[cand[:, 0], cand[:, 1]] = True
    loss = seq_sum_norm(per_token * (~selected).to(per_token.dtype), batch.mask, batch.max_response_len,
                        batch.total_responses)
    return LossOutput(loss, {
        "clip_frac": _frac(clipped, batch.mask), "cov_clip_frac": _frac(selected, batch.mask),
        "cov_candidates": band.sum().float(),
    })


@dataclass
class KLCovParams(ObjectiveParams):
    kl_cov_ratio: float = 2e-4  # share of real tokens (top covariance, at least 1) given the KL term
    kl_cov_coef: float = 1.0  # weight of |log p - log p_old| on the selected tokens


@register("kl_cov", KLCovParams)
def kl_cov(batch: PolicyBatch, hp: KLCovParams) -> LossOutput:
    """KL-Cov (Cui et al.; core_algos.compute_policy_loss_kl_cov).

        l_it = -rho_it A_i + kl_cov_coef * |log p_it - log p_old_it| * S_it

    with NO PPO clipping (clip_low/high and dual_clip are unused, as in the official
    loss). S selects the k = max(1, int(kl_cov_ratio * #real tokens)) real tokens
    with the largest cov_it = token_covariance(A, log p) (ties: torch.topk's order);
    no real token -> nothing selected. Selection is without gradient; the gradient
    flows through rho and through |log ratio| on S. Aggregation seq-mean-token-sum-norm.
    Official values in SIREN: ratio 2e-4 (a fraction; Cui et al.'s 7B scripts use
    k_percent 0.2 = 2e-3, the 32B ones 2e-4), coef 1.
    """
    adv = advantages(batch, scale=False)
    log_ratio = batch.logp - batch.old_logp
    pg = -adv.unsqueeze(-1) * torch.exp(log_ratio)
    n_real = int((batch.mask > 0).sum())
    selected = torch.zeros_like(batch.mask, dtype=torch.bool)
    if n_real > 0:
        k = max(1, int(n_real * hp.kl_cov_ratio))
        cov = token_covariance(adv, batch.logp, batch.mask)
        top = torch.topk(cov.reshape(-1), k).indices
        selected.view(-1)[top] = True
    per_token = pg + hp.kl_cov_coef * log_ratio.abs() * selected.to(pg.dtype)
    loss = seq_sum_norm(per_token, batch.mask, batch.max_response_len, batch.total_responses)
    return LossOutput(loss, {
        "kl_cov_frac": _frac(selected, batch.mask),
        "abs_kl": token_mean(log_ratio.detach().abs(), batch.mask),
    })


@dataclass
class EntropyAdvParams(PolicyTermParams):
    entropy_adv_alpha: float = 0.4  # A + min(alpha * H.detach(), |A| / kappa)
    entropy_adv_kappa: float = 1.0  # SIREN's code uses 1 (Cheng et al. require kappa > 1)

    def needs(self) -> Needs:
        return Needs(entropies=ENTROPY)  # read only: it shapes the advantage

    def check(self, where: str, problems: list[str]) -> None:
        super().check(where, problems)
        if self.entropy_adv_kappa <= 0:
            problems.append(f"'{where}.entropy_adv_kappa' must be > 0, got {self.entropy_adv_kappa}")


@register("entropy_adv", EntropyAdvParams)
def entropy_adv(batch: PolicyBatch, hp: EntropyAdvParams) -> LossOutput:
    """Entropy-based advantage shaping (Cheng et al.; experiment_type 'baseline_entropy_adv').

        A'_it = A_i + min(entropy_adv_alpha * stopgrad(H_it), |A_i| / entropy_adv_kappa)

    then Dr. GRPO's clipped loss with A' (dual clip c = hp.dual_clip applies where
    A' < 0), aggregated seq-mean-token-sum-norm. H is the full-vocabulary entropy of
    the current policy, DETACHED: the entropy term only rescales the advantage and
    carries no gradient. The bonus is >= 0 and at most |A| / kappa, so for kappa >= 1
    A' keeps A's sign, and A = 0 (an all-equal group) gets no bonus. Official values:
    alpha 0.4 (config adv_alpha), kappa hard-coded to 1 in SIREN's code (Cheng et al.
    state kappa > 1).
    """
    if hp.entropy_adv_kappa <= 0:
        raise ValueError(f"entropy_adv_kappa must be > 0, got {hp.entropy_adv_kappa}")
    h = _need_entropy(batch, "entropy_adv").detach()
    adv = advantages(batch, scale=False).unsqueeze(-1)
    bonus = torch.minimum(hp.entropy_adv_alpha * h, adv.abs() / hp.entropy_adv_kappa)
    loss, metrics = policy_term(batch, adv + bonus, hp, "seq-mean-token-sum-norm")
    return LossOutput(loss, {**metrics, "entropy_adv_bonus": token_mean(bonus, batch.mask).detach()})


def forking_mask(h: torch.Tensor, mask: torch.Tensor, top_ratio: float, scope: str = "response") -> torch.Tensor:
    """The 80/20 token selection (no gradient): M_it = H_it > tau (strict), tau the
    linear (1 - top_ratio) quantile of H over the real tokens of each response
    ('response', SIREN's mask_by_quantile) or of the whole batch ('batch', Wang et al.'s
    batch-level threshold). A response whose real tokens share one entropy, or has a
    single token, keeps nothing under 'response'."""
    if not 0 < top_ratio < 1:
        raise ValueError(f"forking_top_ratio must be in (0, 1), got {top_ratio}")
    q = 1.0 - top_ratio
    if scope == "response":
        return peak_entropy_mask(h, mask, q)
    if scope == "batch":
        hd, real = h.detach(), mask > 0
        if not real.any():
            return torch.zeros_like(mask)
        tau = torch.quantile(hd[real].float(), q)
        return ((hd > tau) & real).to(mask.dtype)
    raise ValueError(f"forking_scope must be 'response' or 'batch', got '{scope}'")


@dataclass
class ForkingParams(PolicyTermParams):
    forking_top_ratio: float = 0.2  # keep the tokens with H above the (1 - ratio) quantile
    forking_scope: str = "response"  # the quantile's tokens: 'response' (SIREN's code) | 'batch' (Wang et al.)

    def needs(self) -> Needs:
        return Needs(entropies=ENTROPY)  # read only: it selects tokens

    def check(self, where: str, problems: list[str]) -> None:
        super().check(where, problems)
        check_choice(where, "forking_scope", self.forking_scope, ("response", "batch"), problems)
        if not 0 < self.forking_top_ratio < 1:
            problems.append(f"'{where}.forking_top_ratio' must be in (0, 1), got {self.forking_top_ratio}")


@register("forking_80_20", ForkingParams)
def forking_80_20(batch: PolicyBatch, hp: ForkingParams) -> LossOutput:
    """Policy gradient on the high-entropy "forking" tokens only (Wang et al.;
    experiment_type 'baseline_eighty_twenty').

        loss = sum_{i,t} m_it M_it l_it / (N * max_response_len)

    l_it is Dr. GRPO's clipped token loss (dual clip c = hp.dual_clip for A < 0) and
    M = forking_mask(H, m, forking_top_ratio, forking_scope): with the defaults, the
    tokens above each response's 0.8 entropy quantile (strict), as SIREN's code does
    it. H is the full-vocabulary entropy, used only to select tokens (no gradient);
    the gradient reaches log p only through selected tokens. Unselected tokens keep
    their place in the denominator (the official agg_loss divides by rows * width
    whatever the mask). Wang et al. pick the top 20% of the whole batch on top of
    DAPO: forking_scope 'batch' reproduces their selection only.
    """
    h = _need_entropy(batch, "forking_80_20")
    m = forking_mask(h, batch.mask, hp.forking_top_ratio, hp.forking_scope)
    loss, metrics = policy_term(batch, advantages(batch, scale=False), hp, "seq-mean-token-sum-norm",
                                mask=batch.mask * m)
    return LossOutput(loss, {**metrics, "forking_frac": _frac(m, batch.mask)})
