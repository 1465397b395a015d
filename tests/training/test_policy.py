"""Token log-probs of packed responses: layout, and the shared-prompt forward."""

import math

import pytest
import torch

from rlvr.training.entropy import full_entropy
from rlvr.training.logit_blocks import CHUNK_ROWS
from rlvr.training.packing import pack, pack_flat
from rlvr.training.policy import evaluate_tokens, token_logprobs


def test_pack_layout_left_pads_prompts_and_right_pads_responses():
    p = pack([[5, 6], [7]], [[1, 2, 3], [4]], pad_id=0)
    assert p.prompt_len == 2
    assert p.input_ids.tolist() == [[5, 6, 1, 2, 3], [0, 7, 4, 0, 0]]
    assert p.attention_mask.tolist() == [[1, 1, 1, 1, 1], [0, 1, 1, 0, 0]]
    assert p.position_ids[1, 1:3].tolist() == [0, 1]  # positions start at the first real token
    assert p.response_ids.tolist() == [[1, 2, 3], [4, 0, 0]]
    assert p.response_mask.tolist() == [[1, 1, 1], [1, 0, 0]]


def test_padding_free_layout_by_hand():
    p = pack_flat([[5, 6], [7]], [[1, 2, 3], [4]], pad_id=0)
    assert p.input_ids.tolist() == [[5, 6, 1, 2, 3, 7, 4]] and p.attention_mask is None
    assert p.position_ids.tolist() == [[0, 1, 2, 3, 4, 0, 1]]  # restarting: the sequence boundaries
    assert p.response_ids.tolist() == [[1, 2, 3], [4, 0, 0]] and p.response_mask.tolist() == [[1, 1, 1], [1, 0, 0]]
    assert p.token_index.tolist() == [0, 1, 2, 3]
    assert p.hidden_index.tolist() == [1, 2, 3, 5]  # "6" predicts 1, "1" predicts 2, "2" predicts 3, "7" predicts 4


def test_pack_rejects_groups_that_do_not_share_a_prompt():
    with pytest.raises(ValueError, match="groups of 2"):
        pack([[1], [2]], [[3], [4]], pad_id=0, group_size=2)
    with pytest.raises(ValueError, match="groups of 2"):
        pack([[1], [1], [2]], [[3], [4], [5]], pad_id=0, group_size=2)


def _reference_logprobs(logits, tokens, temperature):
    return torch.log_softmax(logits.double() / temperature, -1).gather(-1, tokens[..., None]).squeeze(-1)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_token_logprobs_value_and_gradient_match_log_softmax(dtype):
    """Across row blocks (rows > CHUNK_ROWS), any logits dtype, temperature != 1."""
    g = torch.Generator().manual_seed(0)
    rows, vocab = 2 * CHUNK_ROWS + 3, 300
    logits = (3 * torch.randn(rows, vocab, generator=g)).to(dtype).requires_grad_()
    tokens = torch.randint(0, vocab, (rows,), generator=g)
    weights = torch.randn(rows, generator=g, dtype=torch.float64)
    lp = token_logprobs(logits, tokens, temperature=0.7)
    assert lp.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
    (lp.double() * weights).sum().backward()
    ours = logits.grad.clone()
    logits.grad = None
    ref = _reference_logprobs(logits, tokens, 0.7)
    (ref * weights).sum().backward()
    tol = {torch.float64: 1e-12, torch.float32: 1e-5, torch.bfloat16: 1e-5}[dtype]
    torch.testing.assert_close(lp.double(), ref.detach(), atol=tol, rtol=0)
    # the gradient comes back in the logits' dtype: bf16 rounding is the only error there
    gtol = {torch.float64: 1e-12, torch.float32: 1e-6, torch.bfloat16: 2e-2}[dtype]
    torch.testing.assert_close(ours.double(), logits.grad.double(), atol=gtol, rtol=gtol)


def test_token_logprobs_passes_gradcheck_and_keeps_leading_shape():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(2, 3, 7, generator=g, dtype=torch.float64, requires_grad=True)
    tokens = torch.randint(0, 7, (2, 3), generator=g)
    assert token_logprobs(logits, tokens).shape == (2, 3)
    assert torch.autograd.gradcheck(lambda x: token_logprobs(x, tokens, 1.3), (logits,))


def test_token_logprobs_of_no_rows():
    logits = torch.zeros(0, 5, requires_grad=True)
    lp = token_logprobs(logits, torch.zeros(0, dtype=torch.long))
    lp.sum().backward()
    assert lp.shape == (0,) and logits.grad.shape == (0, 5)


def test_token_logprobs_and_entropy_hand_values():
    logits = torch.tensor([[[0.0, math.log(3.0)]]])  # p = [1/4, 3/4]
    lp = token_logprobs(logits, torch.tensor([[1]]))
    assert lp.item() == pytest.approx(math.log(0.75), abs=1e-6)
    h = full_entropy(logits)
    assert h.item() == pytest.approx(-(0.25 * math.log(0.25) + 0.75 * math.log(0.75)), abs=1e-6)


@pytest.fixture(scope="module")
def model(tiny_model):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)


def _logp_and_grad(model, packed):
    model.zero_grad()
    out = evaluate_tokens(model, packed, temperature=0.7, entropies=["entropy"], grad_entropies=["entropy"])
    (out["logp"] * packed.response_mask).sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return out, grads


def test_shared_prompt_forward_matches_the_plain_forward(model):
    """The prompt once per group, its KV repeated: same log-probs, entropies and gradients."""
    g = torch.Generator().manual_seed(0)
    prompts, responses = [], []
    for plen, rlens in ((7, [5, 1, 9]), (11, [3, 12, 2])):  # two prompt lengths, a one-token response
        prompt = torch.randint(10, 1000, (plen,), generator=g).tolist()
        for r in rlens:
            prompts.append(prompt)
            responses.append(torch.randint(10, 1000, (r,), generator=g).tolist())
    plain, plain_grads = _logp_and_grad(model, pack(prompts, responses, 0, group_size=1))
    shared, shared_grads = _logp_and_grad(model, pack(prompts, responses, 0, group_size=3))
    mask = pack(prompts, responses, 0).response_mask.bool()
    for key in ("logp", "entropy"):
        torch.testing.assert_close(shared[key][mask], plain[key][mask], atol=1e-4, rtol=1e-4)
    assert shared_grads.keys() == plain_grads.keys()
    for name, grad in plain_grads.items():
        torch.testing.assert_close(shared_grads[name], grad, atol=1e-5, rtol=1e-3, msg=name)


def test_padding_free_forward_matches_the_padded_one(model):
    """One row with restarting position ids (a block-diagonal causal mask on
    CPU) against the padded batch: same log-probs, entropies and gradients,
    with unequal prompts, a one-token and an empty response."""
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(10, 1000, (k,), generator=g).tolist() for k in (7, 7, 11, 4)]
    responses = [torch.randint(10, 1000, (k,), generator=g).tolist() for k in (5, 1, 12, 0)]
    padded, padded_grads = _logp_and_grad(model, pack(prompts, responses, 0))
    flat, flat_grads = _logp_and_grad(model, pack_flat(prompts, responses, 0))
    for key in ("logp", "entropy"):
        assert flat[key].shape == padded[key].shape == (4, 12)
        torch.testing.assert_close(flat[key], padded[key], atol=1e-4, rtol=1e-4)  # zeros at padding in both
    assert flat_grads.keys() == padded_grads.keys()
    for name, grad in padded_grads.items():
        torch.testing.assert_close(flat_grads[name], grad, atol=1e-5, rtol=1e-3, msg=name)


def test_padding_is_zero_and_does_not_change_real_tokens(model):
    """A response alone and the same response padded beside a longer one (and an empty one)."""
    prompt, short, long = [11, 12, 13], [40, 41], [50, 51, 52, 53, 54]
    alone = evaluate_tokens(model, pack([prompt], [short], 0), 0.7, entropies=["entropy"])
    batch = evaluate_tokens(model, pack([prompt] * 3, [short, long, []], 0, group_size=3), 0.7,
                            entropies=["entropy"])
    for key in ("logp", "entropy"):
        torch.testing.assert_close(batch[key][0, :2], alone[key][0], atol=1e-5, rtol=1e-5)
        assert batch[key][0, 2:].eq(0).all() and batch[key][2].eq(0).all()  # padding, empty response
    assert (batch["logp"][1] < 0).all() and (batch["entropy"][1] > 0).all()


def test_measured_entropies_equal_the_differentiable_ones(model):
    packed = pack([[5, 6, 7]] * 2, [[20, 21, 22], [30]], 0, group_size=2)
    topp = {"top_p": 0.9, "top_k": 1000}
    both = ["entropy", "topp_entropy"]
    measured = evaluate_tokens(model, packed, 0.7, entropies=both, topp=topp)
    grad = evaluate_tokens(model, packed, 0.7, entropies=both, grad_entropies=both, topp=topp)
    assert grad["entropy"].requires_grad and not measured["entropy"].requires_grad
    for key in ("logp", *both):
        torch.testing.assert_close(measured[key], grad[key].detach(), atol=1e-5, rtol=1e-5)


def test_unknown_entropy_is_an_error(model):
    with pytest.raises(ValueError, match="unknown entropies"):
        evaluate_tokens(model, pack([[5]], [[6]], 0), 1.0, entropies=["entropie"])
    with pytest.raises(ValueError, match="needs topp"):
        evaluate_tokens(model, pack([[5]], [[6]], 0), 1.0, entropies=["topp_entropy"])


def test_chunked_lm_head_matches_the_plain_one(model, monkeypatch):
    """Above CHUNKED_ABOVE logits the LM head runs in row blocks, recomputed in
    backward: same log-probs, measured entropies and gradients (tied embeddings
    included) as the plain head that keeps all logits."""
    import rlvr.training.policy as policy

    g = torch.Generator().manual_seed(1)
    prompts = [[5, 6, 7]] * 3 + [[8, 9]] * 3
    responses = [torch.randint(10, 1000, (n,), generator=g).tolist() for n in (70, 3, 41, 1, 66, 20)]
    packed = pack(prompts, responses, 0, group_size=3)  # 201 response tokens: 4 blocks of 64 rows

    def run():
        model.zero_grad()
        out = evaluate_tokens(model, packed, 0.7, entropies=["entropy", "topp_entropy"],
                              topp={"top_p": 0.9, "top_k": 1000})
        (out["logp"] * packed.response_mask * torch.linspace(0.5, 1.5, packed.response_mask.shape[1])).sum().backward()
        return out, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    monkeypatch.setattr(policy, "CHUNKED_ABOVE", 1 << 60)
    plain, plain_grads = run()
    monkeypatch.setattr(policy, "CHUNKED_ABOVE", 0)
    assert policy._chunked(model.get_output_embeddings(), 201)
    chunked, chunked_grads = run()
    for key in ("logp", "entropy", "topp_entropy"):
        torch.testing.assert_close(chunked[key], plain[key].detach(), atol=1e-5, rtol=1e-5)
    assert chunked_grads.keys() == plain_grads.keys()
    for name, grad in plain_grads.items():
        torch.testing.assert_close(chunked_grads[name], grad, atol=1e-5, rtol=1e-4, msg=name)


def test_chunked_head_with_entropy_gradients_matches_full_logits(model, monkeypatch):
    """SIREN and the entropy bonuses differentiate an entropy: above
    CHUNKED_ABOVE that runs in checkpointed row blocks (no [tokens, vocabulary]
    float32 tensor), with the same values and gradients as the full logits."""
    import rlvr.training.policy as policy

    g = torch.Generator().manual_seed(2)
    prompts = [[5, 6, 7]] * 2 + [[8, 9]] * 2
    responses = [torch.randint(10, 1000, (n,), generator=g).tolist() for n in (70, 3, 61, 1)]
    packed = pack(prompts, responses, 0, group_size=2)  # 135 tokens: 3 blocks of 64 rows
    both = ["entropy", "topp_entropy"]
    weights = torch.linspace(0.5, 1.5, packed.response_mask.shape[1])

    def run():
        model.zero_grad()
        out = evaluate_tokens(model, packed, 0.7, entropies=both, grad_entropies=both,
                              topp={"top_p": 0.9, "top_k": 1000})
        loss = ((out["logp"] + 0.3 * out["entropy"] - 0.7 * out["topp_entropy"]) * packed.response_mask * weights)
        loss.sum().backward()
        return out, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    monkeypatch.setattr(policy, "CHUNKED_ABOVE", 1 << 60)
    plain, plain_grads = run()
    monkeypatch.setattr(policy, "CHUNKED_ABOVE", 0)
    chunked, chunked_grads = run()
    assert chunked["topp_entropy"].requires_grad and chunked["topp_entropy"].abs().sum() > 0
    for key in ("logp", *both):
        torch.testing.assert_close(chunked[key].detach(), plain[key].detach(), atol=1e-5, rtol=1e-5)
    assert chunked_grads.keys() == plain_grads.keys()
    for name, grad in plain_grads.items():
        torch.testing.assert_close(chunked_grads[name], grad, atol=1e-5, rtol=1e-4, msg=name)
