"""Token log-probs (and entropies) of sampled responses under the training model.

Sequences are laid out as [left-padded prompt | right-padded response], so
every response starts at the same column and only the response positions go
through the LM head: prompt logits are never materialized, and log p comes
from gather - logsumexp without a full-vocabulary log-softmax tensor.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rlvr.objectives.siren import topp_entropy


@dataclass
class Packed:
    input_ids: torch.Tensor  # [N, Lp + T]
    attention_mask: torch.Tensor  # [N, Lp + T]
    position_ids: torch.Tensor  # [N, Lp + T]
    response_ids: torch.Tensor  # [N, T]
    response_mask: torch.Tensor  # [N, T] float
    prompt_len: int  # Lp


def pack(prompts: list[list[int]], responses: list[list[int]], pad_id: int) -> Packed:
    lp = max(len(p) for p in prompts)
    t = max(max(len(r) for r in responses), 1)
    n = len(prompts)
    ids = torch.full((n, lp + t), pad_id, dtype=torch.long)
    attn = torch.zeros((n, lp + t), dtype=torch.long)
    for i, (p, r) in enumerate(zip(prompts, responses)):
        ids[i, lp - len(p) : lp] = torch.tensor(p, dtype=torch.long)
        attn[i, lp - len(p) : lp] = 1
        if r:
            ids[i, lp : lp + len(r)] = torch.tensor(r, dtype=torch.long)
            attn[i, lp : lp + len(r)] = 1
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    resp_mask = attn[:, lp:].float()
    return Packed(ids, attn, pos, ids[:, lp:], resp_mask, lp)


def response_logits(model, packed: Packed, temperature: float = 1.0) -> torch.Tensor:
    """Logits predicting each response token ([N, T, V], float32)."""
    hidden = model.base_model(input_ids=packed.input_ids, attention_mask=packed.attention_mask,
                              position_ids=packed.position_ids, use_cache=False).last_hidden_state
    t = packed.response_ids.shape[1]
    h = hidden[:, packed.prompt_len - 1 : packed.prompt_len - 1 + t]
    logits = model.get_output_embeddings()(h).float()
    return logits / temperature if temperature != 1.0 else logits


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    return logits.gather(-1, tokens.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)


def full_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the whole next-token distribution ([N, T])."""
    logz = torch.logsumexp(logits, dim=-1, keepdim=True)
    p = torch.exp(logits - logz)
    return (logz.squeeze(-1) - (p * logits).sum(-1))


def evaluate_tokens(model, packed: Packed, temperature: float, entropy: bool = False, topp: dict | None = None
                    ) -> dict[str, torch.Tensor]:
    """log p, and optionally full and top-p entropies, of the packed responses."""
    logits = response_logits(model, packed, temperature)
    out = {"logp": token_logprobs(logits, packed.response_ids)}
    if entropy:
        out["entropy"] = full_entropy(logits)
    if topp is not None:
        # The logits are already divided by the rollout temperature.
        out["topp_entropy"] = topp_entropy(logits, 1.0, topp["top_p"], topp["top_k"])
    return out
