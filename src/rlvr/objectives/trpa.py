"""TRPA: Trust Region Preference Approximation (Su et al., arXiv 2504.04524).

A preference loss over a question's responses: each response's score is its
mean token log-ratio to the frozen reference model, every (better, worse)
pair of a group gives a logistic loss on the score difference, and a k3 KL to
the rollout policy keeps the update in a trust region. With a verifier's
binary rewards the levels are correct (1) and wrong (2), so every pair is a
correct against a wrong response.

As the official code (XueruiSu/Trust-Region-Preference-Approximation,
core_algos.py compute_pairwise_policy_loss lines 285-350, dp_actor.py lines
262-313): a pair whose better response is level 1 is weighted by
anisotropy * beta; pairs are averaged over the whole loss call; a call with
no pair falls back to -log sigmoid(+-score) per response, without beta.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from rlvr.objectives.base import LossOutput, Needs, ObjectiveParams, PolicyBatch, k3_kl, seq_mean, token_mean
from rlvr.objectives.registry import register


@dataclass
class TrpaParams(ObjectiveParams):
    beta: float = 0.1  # the preference loss's inverse temperature (main_TRPA.sh line 12)
    anisotropy: float = 2.5  # extra weight of pairs won by a correct response (line 13)
    trust_region_coef: float = 1e-3  # weight of the k3 KL to pi_old (tr_kl_loss_coef, line 21)

    def needs(self) -> Needs:
        # pairs are within a group, scores against the reference; pairs are averaged per loss call
        return Needs(whole_groups=True, reference_model=True, per_call=True)

    def check(self, where: str, problems: list[str]) -> None:
        super().check(where, problems)
        if self.beta <= 0 or self.anisotropy <= 0 or self.trust_region_coef < 0:
            problems.append(f"'{where}': beta and anisotropy must be > 0 and trust_region_coef >= 0, "
                            f"got {self.beta}, {self.anisotropy}, {self.trust_region_coef}")


def log_ratio_scores(logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[N] mean token log-prob under the policy minus the same under the reference."""
    return seq_mean(logp, mask) - seq_mean(ref_logp, mask)


def pair_losses(s: torch.Tensor, positive: torch.Tensor, group_size: int, weight: float):
    """-log sigmoid(weight * (s_win - s_lose)) summed over every (correct, wrong)
    pair within each group, and the number of pairs: all n x n differences of a
    group at once, masked, so the shapes never depend on the data (no host sync)."""
    sq, pq = s.view(-1, group_size), positive.view(-1, group_size)
    h = weight * (sq[:, :, None] - sq[:, None, :])  # [G, win, lose]
    pairs = (pq[:, :, None] & ~pq[:, None, :]).to(s.dtype)
    return (-F.logsigmoid(h) * pairs).sum(), pairs.sum()


@register("trpa", TrpaParams, examples=({},))
def trpa(batch: PolicyBatch, hp: TrpaParams) -> LossOutput:
    """Loss = -mean_pairs log sigmoid(anisotropy * beta * (s_w - s_l))
            + trust_region_coef * token-mean k3 KL(pi || pi_old),

    s = seq_mean(log pi) - seq_mean(log pi_ref). Without any pair in the call:
    -mean_i log sigmoid(sign_i * s_i), sign +1 for correct, -1 for wrong (the
    official fallback). Both terms are the call's means, weighted by its share
    of the mini-batch, as verl weighs a micro-batch's loss."""
    if batch.ref_logp is None:
        raise ValueError("trpa needs reference log-probs (ref_logp)")
    s = log_ratio_scores(batch.logp, batch.ref_logp, batch.mask)
    positive = batch.rewards > 0.5
    pair_sum, pairs = pair_losses(s, positive, batch.group_size, hp.anisotropy * hp.beta)
    fallback = -F.logsigmoid(torch.where(positive, s, -s)).mean()
    preference = torch.where(pairs > 0, pair_sum / pairs.clamp(min=1), fallback)
    # verl's low_var_kl: k3 of (pi_old - pi), clamped to [-10, 10]
    trust = token_mean(torch.clamp(k3_kl(batch.logp, batch.old_logp), -10.0, 10.0), batch.mask)
    loss = batch.share * (preference + hp.trust_region_coef * trust)
    return LossOutput(loss, {"trpa_pairs": pairs.detach(),
                             "trpa_preference": preference.detach(), "trust_region_kl": trust.detach()})
