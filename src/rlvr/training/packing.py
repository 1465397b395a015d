"""How a loss call's sequences are laid out for the model's forward.

Padded (`pack`): [left-padded prompt | right-padded response], so every
response starts at the same column; rows that share a prompt come in groups.

Padding-free (`pack_flat`, train.padding_free): every sequence back to back
in one row, no padding at all, position ids restarting at 0 per sequence and
no attention mask. Transformers reads the sequence boundaries from the
position ids: flash-attention's varlen kernel on a GPU (verl's
`use_remove_padding`, TRL's `padding_free`), a block-diagonal mask with
sdpa or flex attention.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch


@dataclass
class Packed:
    input_ids: torch.Tensor  # [N, Lp + T]; padding-free: [1, S], S the sum of the sequences' lengths
    attention_mask: torch.Tensor | None  # [N, Lp + T]; padding-free: None
    position_ids: torch.Tensor  # [N, Lp + T]; padding-free: [1, S], from 0 in each sequence
    response_ids: torch.Tensor  # [N, T]
    response_mask: torch.Tensor  # [N, T] float
    prompt_len: int  # Lp (padding-free: 0, unused)
    group_size: int = 1  # consecutive rows that share one prompt
    token_index: torch.Tensor | None = None  # [M] flat positions of the real response tokens in [N * T]
    hidden_index: torch.Tensor | None = None  # padding-free: [M] positions in [S] of the states predicting them

    def to(self, device: torch.device) -> "Packed":
        """The same batch on `device`: the one place where a batch leaves the CPU."""
        moved = {f.name: getattr(self, f.name).to(device, non_blocking=True)
                 for f in dataclasses.fields(self) if isinstance(getattr(self, f.name), torch.Tensor)}
        return dataclasses.replace(self, **moved)


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
    # Computed here, on the CPU: selecting real tokens by index on the device
    # needs no host sync, selecting them by a boolean mask does (its size).
    index = attn[:, lp:].reshape(-1).nonzero().squeeze(1)
    return Packed(ids, attn, pos, ids[:, lp:], resp_mask, lp, group_size, index)


def pack_flat(prompts: list[list[int]], responses: list[list[int]], pad_id: int) -> Packed:
    """The sequences concatenated into one row without padding. Response
    tensors keep the [N, T] layout the objectives read; `hidden_index` says
    which position's hidden state predicts each real response token."""
    n, t = len(prompts), max(max((len(r) for r in responses), default=0), 1)
    lengths = [len(p) + len(r) for p, r in zip(prompts, responses)]
    ids = torch.tensor([tok for p, r in zip(prompts, responses) for tok in (*p, *r)], dtype=torch.long)
    pos = torch.cat([torch.arange(k) for k in lengths])
    response_ids = torch.full((n, t), pad_id, dtype=torch.long)
    response_mask = torch.zeros((n, t))
    predicting, start = [], 0
    for i, (p, r) in enumerate(zip(prompts, responses)):
        response_ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        response_mask[i, : len(r)] = 1
        # position start + len(p) - 1 + j (the token before response token j) predicts it
        predicting.append(torch.arange(len(r)) + start + len(p) - 1)
        start += lengths[i]
    index = response_mask.reshape(-1).nonzero().squeeze(1)
    return Packed(ids[None], None, pos[None], response_ids, response_mask, 0, 1, index, torch.cat(predicting))


def attention_implementation(padding_free: bool) -> str | None:
    """The attention kernel to load the model with (None: its default, sdpa).
    Padding-free calls on a GPU need one that reads the sequence boundaries
    from the position ids without an [S, S] mask: flash-attention 2 when
    installed (verl, TRL), else PyTorch's flex attention (a block-sparse mask).
    On CPU sdpa's block-diagonal mask is small enough."""
    if not padding_free or not torch.cuda.is_available():
        return None
    import importlib.util

    return "flash_attention_2" if importlib.util.find_spec("flash_attn") else "flex_attention"
