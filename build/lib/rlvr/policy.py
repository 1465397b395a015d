"""Token log-probs (and entropies) of sampled responses under the training model.

Sequences are laid out as [left-padded prompt | right-padded response], so
every response starts at the same column. Only real response tokens go
through the LM head (no prompt or padding logits), and log p and its gradient
are formed block by block in float32 from the logits as the model made them
(bf16 on bf16 hardware): no full-vocabulary float32 tensor is materialized.

The n responses of a question share its prompt. When rows come in such
groups, the prompt goes through the model once per group and its keys and
values are repeated for the n responses (autograd sums their gradients), so
prompt tokens cost 1/n of a plain forward.

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
from torch.utils.checkpoint import checkpoint


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


def _real_response_hidden(model, packed: Packed) -> torch.Tensor:
    """Hidden states that predict the real response tokens ([M, H], in token_index order)."""
    if packed.hidden_index is not None:  # padding-free: one row, boundaries from the position ids
        hidden = model.base_model(input_ids=packed.input_ids, position_ids=packed.position_ids,
                                  use_cache=False).last_hidden_state[0]
        return hidden.index_select(0, packed.hidden_index)
    return _response_hidden(model, packed).flatten(0, 1).index_select(0, packed.token_index)


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


# Rows of a [rows, V] float32 block handled at once by the vocabulary-wide
# kernels below: ~12 MiB for a 49k vocabulary, so a block stays in cache.
CHUNK_ROWS = 64


def _compute_dtype(logits: torch.Tensor) -> torch.dtype:
    return torch.promote_types(logits.dtype, torch.float32)  # bf16 -> fp32; fp64 stays


class _Blocks:
    """Row blocks of [M, V] logits, each copied into one reused float32 buffer
    and divided by the temperature. Reusing the buffer matters on CPU: a fresh
    12 MiB allocation per block costs page faults that cost more than the math."""

    def __init__(self, logits: torch.Tensor, temperature: float):
        self.logits, self.temperature = logits, temperature
        rows = min(CHUNK_ROWS, logits.shape[0])
        self.buffer = torch.empty((rows, logits.shape[1]), dtype=_compute_dtype(logits), device=logits.device)

    def __iter__(self):
        for i in range(0, self.logits.shape[0], CHUNK_ROWS):
            s = slice(i, min(i + CHUNK_ROWS, self.logits.shape[0]))
            z = self.buffer[: s.stop - s.start]
            yield s, z.copy_(self.logits[s]).div_(self.temperature)


def _logsumexp_(z: torch.Tensor) -> torch.Tensor:
    """log sum exp over the last dim; overwrites z with exp(z - max)."""
    top = z.amax(dim=-1, keepdim=True)
    return z.sub_(top).exp_().sum(-1).log_().add_(top.squeeze(-1))


class _SampledLogProb(torch.autograd.Function):
    """log softmax(logits / T)[token] per row of [M, V] logits, in float32 whatever
    the logits' dtype, one row block at a time.

    Backward keeps only the logits (as they are) and one log-normaliser per
    row, and forms d logp / d logits = (onehot(token) - softmax) / T block by
    block, so no [M, V] float32 tensor is ever materialized.
    """

    @staticmethod
    def forward(ctx, logits, tokens, temperature):
        logz = torch.empty(logits.shape[0], dtype=_compute_dtype(logits), device=logits.device)
        logp = torch.empty_like(logz)
        for s, z in _Blocks(logits, temperature):
            picked = z.gather(-1, tokens[s, None]).squeeze(-1)
            logz[s] = _logsumexp_(z)
            logp[s] = picked - logz[s]
        ctx.save_for_backward(logits, tokens, logz)
        ctx.temperature = temperature
        return logp

    @staticmethod
    def backward(ctx, grad_logp):
        logits, tokens, logz = ctx.saved_tensors
        grad = torch.empty_like(logits)
        for s, z in _Blocks(logits, ctx.temperature):
            g = grad_logp[s, None] / ctx.temperature
            probs = z.sub_(logz[s, None]).exp_()
            grad[s] = probs.mul_(-g).scatter_add_(-1, tokens[s, None], g)
        return grad, None, None


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """log softmax(logits / T) at `tokens` ([..., V], [...] -> [...], float32)."""
    flat = _SampledLogProb.apply(logits.reshape(-1, logits.shape[-1]), tokens.reshape(-1), temperature)
    return flat.view(tokens.shape)


def full_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the whole next-token distribution ([..., V] -> [...]), differentiable."""
    logz = torch.logsumexp(logits, dim=-1, keepdim=True)
    p = torch.exp(logits - logz)
    return (logz.squeeze(-1) - (p * logits).sum(-1))


NUCLEUS_PROBE = 256


def topp_entropy(logits: torch.Tensor, temperature: float = 1.0, top_p: float = 0.8, top_k: int = 10000
                 ) -> torch.Tensor:
    """SIREN's top-p entropy: the entropy of the renormalized nucleus, per position
    ([..., V] -> [...]).

    The nucleus S holds the tokens whose inclusive cumulative mass (sorted,
    top_k at most) is strictly below top_p: the token that crosses top_p is
    not in S. |S| <= 1 gives 0. S is chosen without gradient; the gradient
    flows through the renormalized probabilities q.
    """
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    k = min(top_k, probs.shape[-1])
    # A nucleus is usually small: look at the top 256 first. Where they already
    # hold top_p of the mass, no later token can be in S, so the result is exact.
    top, _ = torch.topk(probs, min(k, NUCLEUS_PROBE), dim=-1)  # sorted, descending
    if top.shape[-1] < k and bool((top.sum(-1) < top_p).any()):
        top, _ = torch.topk(probs, k, dim=-1)
    with torch.no_grad():
        keep = (torch.cumsum(top, dim=-1) < top_p).float()
    kept = top * keep
    q = kept / kept.sum(-1, keepdim=True).clamp(min=1e-12)
    h = -(q * torch.log(q.clamp(min=1e-12))).sum(-1)
    return torch.where(keep.sum(-1) > 1, h, torch.zeros_like(h))


ENTROPIES = ("entropy", "topp_entropy")


def _entropy(name: str, scaled_logits: torch.Tensor, topp: dict | None) -> torch.Tensor:
    if name == "entropy":
        return full_entropy(scaled_logits)
    return topp_entropy(scaled_logits, 1.0, topp["top_p"], topp["top_k"])


@torch.no_grad()
def _measured_entropies(logits: torch.Tensor, temperature: float, names, topp: dict | None) -> dict:
    """Entropies without gradient (metrics, SIREN's anchor), one row block at a time."""
    out = {n: torch.empty(logits.shape[0], dtype=_compute_dtype(logits), device=logits.device) for n in names}
    if not out:
        return out
    for s, z in _Blocks(logits, temperature):
        for n in names:
            out[n][s] = _entropy(n, z, topp)
    return out


def _unpad(values: torch.Tensor, packed: Packed) -> torch.Tensor:
    """[M] values of the real tokens -> [N, T] with 0 at padding (keeps the gradient)."""
    shape = packed.response_mask.shape
    flat = torch.zeros(shape[0] * shape[1], dtype=values.dtype, device=values.device)
    return flat.index_put((packed.token_index,), values).view(shape)


# Above this many logits ([tokens, vocabulary]) per call, the LM head runs in row
# blocks and is recomputed in the backward pass instead of being kept: a paper
# recipe's loss call (8 responses x 9k tokens x a 152k vocabulary) would
# otherwise hold 22 GB of bf16 logits and as much again for their gradient.
CHUNKED_ABOVE = 1 << 28


class _ChunkedHeadLogProb(torch.autograd.Function):
    """log softmax(hidden @ W.T / T)[token] per row, the logits made one row
    block at a time and never kept: backward recomputes each block and forms
    d/d hidden = g @ W and d/d W = g.T @ hidden with g = (onehot - softmax) / T."""

    @staticmethod
    def forward(ctx, hidden, weight, tokens, temperature, rows):
        logp = torch.empty(hidden.shape[0], dtype=torch.float32, device=hidden.device)
        logz = torch.empty_like(logp)
        for i in range(0, hidden.shape[0], rows):
            z = (hidden[i : i + rows] @ weight.T).float().div_(temperature)
            picked = z.gather(-1, tokens[i : i + rows, None]).squeeze(-1)
            logz[i : i + rows] = _logsumexp_(z)
            logp[i : i + rows] = picked - logz[i : i + rows]
        ctx.save_for_backward(hidden, weight, tokens, logz)
        ctx.temperature, ctx.rows = temperature, rows
        return logp

    @staticmethod
    def backward(ctx, grad_logp):
        hidden, weight, tokens, logz = ctx.saved_tensors
        grad_hidden = torch.empty_like(hidden)
        grad_weight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
        for i in range(0, hidden.shape[0], ctx.rows):
            s = slice(i, i + ctx.rows)
            g = grad_logp[s, None] / ctx.temperature
            probs = (hidden[s] @ weight.T).float().div_(ctx.temperature).sub_(logz[s, None]).exp_()
            dz = probs.mul_(-g).scatter_add_(-1, tokens[s, None], g).to(hidden.dtype)
            grad_hidden[s] = dz @ weight
            grad_weight += (dz.T @ hidden[s]).float()
        return grad_hidden, grad_weight.to(weight.dtype), None, None, None


def _chunked(head, rows: int) -> bool:
    """Block the head when its logits would be large; not under ZeRO-3, whose
    partitioned weight exists only inside the module's own forward."""
    w = head.weight
    return getattr(head, "bias", None) is None and not hasattr(w, "ds_id") and rows * w.shape[0] > CHUNKED_ABOVE


HEAD_BLOCK_LOGITS = 1 << 27  # float32 logits per LM-head row block on a GPU: 512 MiB (rlvr.memory counts them)


def _head_rows(vocab: int) -> int:
    """Rows per block: ~512 MiB of float32 logits on a GPU, the CPU-cache-sized blocks elsewhere."""
    return max(CHUNK_ROWS, HEAD_BLOCK_LOGITS // vocab) if torch.cuda.is_available() else CHUNK_ROWS


@torch.no_grad()
def _measured_from_hidden(hidden, weight, temperature, names, topp):
    """Entropies without gradient, each logits block made from the hidden states and dropped."""
    out = {n: torch.empty(hidden.shape[0], dtype=torch.float32, device=hidden.device) for n in names}
    rows = _head_rows(weight.shape[0])
    for i in range(0, hidden.shape[0], rows):
        z = (hidden[i : i + rows] @ weight.T).float().div_(temperature)
        for n in names:
            out[n][i : i + rows] = _entropy(n, z, topp)
    return out


def _block_terms(hidden, weight, tokens, temperature, names, topp):
    """log p and the named entropies of one row block, all with gradient."""
    z = (hidden @ weight.T).to(torch.float32) / temperature
    out = {"logp": torch.log_softmax(z, dim=-1).gather(-1, tokens[:, None]).squeeze(-1)}
    out.update({n: _entropy(n, z, topp) for n in names})
    return out


def _checkpointed_blocks(hidden, weight, tokens, temperature, names, topp) -> dict[str, torch.Tensor]:
    """log p and differentiable entropies, one row block of logits at a time,
    each block recomputed in the backward pass (activation checkpointing): only
    one block's [rows, V] float32 logits and their autograd intermediates exist
    at once, never the whole call's."""
    rows = _head_rows(weight.shape[0])
    blocks = [checkpoint(_block_terms, hidden[i : i + rows], weight, tokens[i : i + rows], temperature,
                         tuple(names), topp, use_reentrant=False)
              for i in range(0, hidden.shape[0], rows)]
    return {k: torch.cat([b[k] for b in blocks]) for k in blocks[0]} if blocks else \
        {k: hidden.new_zeros(0, dtype=torch.float32) for k in ("logp", *names)}


def evaluate_tokens(model, packed: Packed, temperature: float, entropies=(), grad_entropies=(),
                    topp: dict | None = None) -> dict[str, torch.Tensor]:
    """log p of the packed responses ([N, T], 0 at padding), plus the named
    `entropies` ("entropy": full vocabulary; "topp_entropy": SIREN's nucleus,
    which needs `topp`), all under the rollout temperature.

    `packed` must be on the model's device (Packed.to). Only real response
    tokens reach the LM head. An entropy also named in `grad_entropies`
    carries gradient (the objective uses it); the others are measured without
    one. Large calls (CHUNKED_ABOVE) never hold their whole logits: the head
    runs in row blocks, recomputed in backward, with or without entropy
    gradients.
    """
    unknown = set(entropies) - set(ENTROPIES)
    if unknown:
        raise ValueError(f"unknown entropies {sorted(unknown)}; choose from {ENTROPIES}")
    if "topp_entropy" in entropies and topp is None:
        raise ValueError("the top-p entropy needs topp={'top_p': ..., 'top_k': ...}")
    hidden = _real_response_hidden(model, packed)  # [M, H]
    tokens = packed.response_ids.reshape(-1).index_select(0, packed.token_index)
    head = model.get_output_embeddings()
    differentiable = [n for n in entropies if n in grad_entropies and torch.is_grad_enabled()]
    measured = [n for n in entropies if n not in differentiable]
    if _chunked(head, hidden.shape[0]):
        if differentiable:
            out = _checkpointed_blocks(hidden, head.weight, tokens, temperature, differentiable, topp)
        else:
            rows = _head_rows(head.weight.shape[0])
            out = {"logp": _ChunkedHeadLogProb.apply(hidden, head.weight, tokens, temperature, rows)}
        out.update(_measured_from_hidden(hidden.detach(), head.weight.detach(), temperature, measured, topp))
        return {k: _unpad(v, packed) for k, v in out.items()}
    logits = head(hidden)  # [M, V]
    out = {"logp": token_logprobs(logits, tokens, temperature)}
    if differentiable:
        scaled = logits.to(_compute_dtype(logits)) / temperature
        out.update({n: _entropy(n, scaled, topp) for n in differentiable})
    out.update(_measured_entropies(logits, temperature, measured, topp))
    return {k: _unpad(v, packed) for k, v in out.items()}
