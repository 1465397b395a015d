"""A tiny model that answers: the policy of the smoke on a machine without CUDA.

A random 2-layer model never states an answer, so every reward is 0, no group
carries a signal, and a training step moves nothing: the smoke's push check
would prove the push only with a synthetic change. Taught here for a few
hundred supervised steps to answer one-digit additions in the recipe's own
answer form (its prompt and chat template, its answer marker, a box), it
states an answer every time and the right one about one time in eight (it
learns the form, not addition): over a step of 4 questions x 8 responses its
groups hold right and wrong responses, the recipe's grader rewards some, and
a step's real update moves the weights the engine serves, as on a GPU.
"""

from __future__ import annotations

from pathlib import Path

LEVELS = [1]  # one-digit addition: what a 2-layer model learns to answer in a few hundred steps


def answer_text(gold: str, answer_after: str | None) -> str:
    """A response in the recipe's answer form: its marker (R1-distill: "</think>"), then a box."""
    return f"{answer_after or ''}\n\\boxed{{{gold}}}"


def teach(model_dir: Path, prompt, steps: int = 300, batch: int = 16, lr: float = 3e-3, seed: int = 0) -> float:
    """Train the model at `model_dir` in place to answer one-digit additions in
    `prompt`'s form (rlvr.settings.prompt.PromptParams, the training prompt); returns the
    last batch's loss."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlvr.data.arithmetic import generate
    from rlvr.data.prompts import prompt_token_ids

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    saved = AutoModelForCausalLM.from_pretrained(model_dir).dtype  # the dtype it is stored in: saved back so
    records, _ = generate(LEVELS, 200, 0, seed)
    rows = []
    for r in records:
        p = prompt_token_ids(r.problem, tok, prompt)
        a = tok(answer_text(r.answer, prompt.answer_after), add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        rows.append((p, a))
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    loss = torch.tensor(float("nan"))
    for _ in range(steps):
        chosen = [rows[i] for i in torch.randint(len(rows), (batch,)).tolist()]
        width = max(len(p) + len(a) for p, a in chosen)
        ids = torch.full((batch, width), tok.pad_token_id or 0)
        labels = torch.full((batch, width), -100)
        mask = torch.zeros((batch, width), dtype=torch.long)
        for k, (p, a) in enumerate(chosen):
            ids[k, : len(p) + len(a)] = torch.tensor(p + a)
            labels[k, len(p) : len(p) + len(a)] = torch.tensor(a)  # the loss on the answer alone
            mask[k, : len(p) + len(a)] = 1
        hidden = model.get_decoder()(input_ids=ids, attention_mask=mask).last_hidden_state
        targets = labels[:, 1:]
        keep = targets != -100  # the head only where an answer token is predicted: the vocabulary is the cost
        logits = model.lm_head(hidden[:, :-1][keep])
        loss = torch.nn.functional.cross_entropy(logits, targets[keep])
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.to(saved).save_pretrained(model_dir, safe_serialization=True)
    return float(loss.detach())
