"""Token log-probs (and entropies) of sampled responses under the training model.

Sequences come laid out by rlvr.training.packing. Only real response tokens go
through the LM head (no prompt or padding logits), and log p and its gradient
are formed block by block in float32 from the logits as the model made them
(bf16 on bf16 hardware): no full-vocabulary float32 tensor is materialized.

The n responses of a question share its prompt. When rows come in such
groups, the prompt goes through the model once per group and its keys and
values are repeated for the n responses (autograd sums their gradients), so
prompt tokens cost 1/n of a plain forward.
"""

from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint

from rlvr.settings.buffers import HEAD_BLOCK_LOGITS
from rlvr.training.entropy import ENTROPIES, entropy_of, measured_entropies
from rlvr.training.logit_blocks import CHUNK_ROWS, LogitBlocks, compute_dtype
from rlvr.training.packing import Packed


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
        logz = torch.empty(logits.shape[0], dtype=compute_dtype(logits), device=logits.device)
        logp = torch.empty_like(logz)
        for s, z in LogitBlocks(logits, temperature):
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
        for s, z in LogitBlocks(logits, ctx.temperature):
            g = grad_logp[s, None] / ctx.temperature
            probs = z.sub_(logz[s, None]).exp_()
            grad[s] = probs.mul_(-g).scatter_add_(-1, tokens[s, None], g)
        return grad, None, None


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """log softmax(logits / T) at `tokens` ([..., V], [...] -> [...], float32)."""
    flat = _SampledLogProb.apply(logits.reshape(-1, logits.shape[-1]), tokens.reshape(-1), temperature)
    return flat.view(tokens.shape)


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
            out[n][i : i + rows] = entropy_of(n, z, topp)
    return out


def _block_terms(hidden, weight, tokens, temperature, names, topp):
    """log p and the named entropies of one row block, all with gradient."""
    z = (hidden @ weight.T).to(torch.float32) / temperature
    out = {"logp": torch.log_softmax(z, dim=-1).gather(-1, tokens[:, None]).squeeze(-1)}
    out.update({n: entropy_of(n, z, topp) for n in names})
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
        scaled = logits.to(compute_dtype(logits)) / temperature
        out.update({n: entropy_of(n, scaled, topp) for n in differentiable})
    out.update(measured_entropies(logits, temperature, measured, topp))
    return {k: _unpad(v, packed) for k, v in out.items()}
