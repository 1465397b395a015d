"""Token log-probs (and entropies) of sampled responses under the training model.

Sequences are laid out as [left-padded prompt | right-padded response], so
every response starts at the same column and only the response positions go
through the LM head: prompt logits are never materialized, and log p comes
from gather - logsumexp without a full-vocabulary log-softmax tensor.

The n responses of a question share its prompt. When rows come in such
groups, the prompt goes through the model once per group and its keys and
values are repeated for the n responses (autograd sums their gradients), so
prompt tokens cost 1/n of a plain forward.
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
    group_size: int = 1  # consecutive rows that share one prompt


def pack(prompts: list[list[int]], responses: list[list[int]], pad_id: int, group_size: int = 1) -> Packed:
    """Rows i*group_size .. (i+1)*group_size-1 must hold the same prompt."""
    if len(prompts) % group_size or any(prompts[i] != prompts[i - i % group_size] for i in range(len(prompts))):
        raise ValueError(f"pack: rows do not come in groups of {group_size} that share a prompt")
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
    return Packed(ids, attn, pos, ids[:, lp:], resp_mask, lp, group_size)


def _response_hidden(model, packed: Packed) -> torch.Tensor:
    """Hidden states that predict each response token ([N, T, H])."""
    lp, t = packed.prompt_len, packed.response_ids.shape[1]
    body = model.base_model
    if packed.group_size == 1 or getattr(model, "is_gradient_checkpointing", False):
        # Gradient checkpointing drops the KV cache, so no prompt sharing there.
        hidden = body(input_ids=packed.input_ids, attention_mask=packed.attention_mask,
                      position_ids=packed.position_ids, use_cache=False).last_hidden_state
        return hidden[:, lp - 1 : lp - 1 + t]
    g = packed.group_size
    prefix = body(input_ids=packed.input_ids[::g, :lp], attention_mask=packed.attention_mask[::g, :lp],
                  position_ids=packed.position_ids[::g, :lp], use_cache=True)
    cache = prefix.past_key_values
    cache.batch_repeat_interleave(g)
    rest = body(input_ids=packed.input_ids[:, lp:], attention_mask=packed.attention_mask,
                position_ids=packed.position_ids[:, lp:], past_key_values=cache, use_cache=True).last_hidden_state
    # The last prompt position predicts response token 0; response position j predicts token j+1.
    last_prompt = prefix.last_hidden_state[:, -1:].repeat_interleave(g, dim=0)
    return torch.cat([last_prompt, rest[:, : t - 1]], dim=1)


def response_logits(model, packed: Packed, temperature: float = 1.0) -> torch.Tensor:
    """Logits predicting each response token ([N, T, V], float32)."""
    logits = model.get_output_embeddings()(_response_hidden(model, packed)).float()
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
