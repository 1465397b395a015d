"""Token log-probs of packed responses: layout, and the shared-prompt forward."""

import math

import pytest
import torch

from rlvr.policy import evaluate_tokens, full_entropy, pack, token_logprobs


def test_pack_layout_left_pads_prompts_and_right_pads_responses():
    p = pack([[5, 6], [7]], [[1, 2, 3], [4]], pad_id=0)
    assert p.prompt_len == 2
    assert p.input_ids.tolist() == [[5, 6, 1, 2, 3], [0, 7, 4, 0, 0]]
    assert p.attention_mask.tolist() == [[1, 1, 1, 1, 1], [0, 1, 1, 0, 0]]
    assert p.position_ids[1, 1:3].tolist() == [0, 1]  # positions start at the first real token
    assert p.response_ids.tolist() == [[1, 2, 3], [4, 0, 0]]
    assert p.response_mask.tolist() == [[1, 1, 1], [1, 0, 0]]


def test_pack_rejects_groups_that_do_not_share_a_prompt():
    with pytest.raises(ValueError, match="groups of 2"):
        pack([[1], [2]], [[3], [4]], pad_id=0, group_size=2)
    with pytest.raises(ValueError, match="groups of 2"):
        pack([[1], [1], [2]], [[3], [4], [5]], pad_id=0, group_size=2)


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
    out = evaluate_tokens(model, packed, temperature=0.7, entropy=True)
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
