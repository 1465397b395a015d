"""Prompt construction: a problem in the params' template (`prompt:`), through
the model's chat template where it has one, and the token ids the model sees."""

from __future__ import annotations

from rlvr.settings.prompt import DATASET_SYSTEM, PROBLEM, PromptParams


def user_message(problem: str, prompt: PromptParams) -> str:
    # str.replace, not str.format: templates hold LaTeX braces such as \boxed{}.
    return prompt.user.replace(PROBLEM, problem)


def system_turn(prompt: PromptParams, dataset_system: str | None) -> str | None:
    """The prompt's system turn; {dataset_system} is the record's own (a training set's chat rows)."""
    if prompt.system != DATASET_SYSTEM:
        return prompt.system
    if dataset_system is None:
        raise ValueError(f"prompt.train.system is {DATASET_SYSTEM}, but a training record has no system turn: "
                         "only sets stored as chat turns carry one (openr1_math); set prompt.train.system "
                         "to a text, or to \"\" for none")
    return dataset_system


def templated(tokenizer, prompt: PromptParams) -> bool:
    return bool(prompt.chat_template and tokenizer is not None and getattr(tokenizer, "chat_template", None))


def build_prompt(problem: str, tokenizer=None, prompt: PromptParams | None = None,
                 dataset_system: str | None = None) -> str:
    """The text fed to the model for one problem.

    With `prompt.chat_template` and a tokenizer that has one (SmolLM2-Instruct,
    Qwen, Llama, the DeepSeek-R1-Distill models), an optional system turn and
    the user turn go through it and the assistant turn is opened; otherwise a
    plain completion prompt.
    """
    prompt = prompt or PromptParams()
    message = user_message(problem, prompt)
    system = system_turn(prompt, dataset_system)
    if templated(tokenizer, prompt):
        turns = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": message}]
        return tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True)
    return (f"{system}\n\n" if system else "") + f"Question: {message}\nAnswer:"


def prompt_token_ids(problem: str, tokenizer, prompt: PromptParams, dataset_system: str | None = None) -> list[int]:
    """The prompt's tokens, as the rollout engine and the loss see them.

    A chat template writes its own special tokens (Llama's and the
    DeepSeek-R1-Distill models' begin with BOS), so its text is encoded adding
    none, as verl's rl_dataset does (`add_special_tokens=False`); encoding it as
    plain text would start the prompt with two BOS. A plain prompt gets the
    tokenizer's usual special tokens.
    """
    text = build_prompt(problem, tokenizer, prompt, dataset_system)
    return tokenizer(text, add_special_tokens=not templated(tokenizer, prompt))["input_ids"]
