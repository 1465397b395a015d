"""Prompt construction: a problem in the params' template (`prompt:`), through
the model's chat template where it has one."""

from __future__ import annotations

from rlvr.config import PROBLEM, PromptParams


def user_message(problem: str, prompt: PromptParams) -> str:
    # str.replace, not str.format: templates hold LaTeX braces such as \boxed{}.
    return prompt.user.replace(PROBLEM, problem)


def build_prompt(problem: str, tokenizer=None, prompt: PromptParams | None = None) -> str:
    """The text fed to the model for one problem.

    With `prompt.chat_template` and a tokenizer that has one (SmolLM2-Instruct,
    Qwen, Llama, the DeepSeek-R1-Distill models), an optional system turn and
    the user turn go through it and the assistant turn is opened; otherwise a
    plain completion prompt.
    """
    prompt = prompt or PromptParams()
    message = user_message(problem, prompt)
    if prompt.chat_template and tokenizer is not None and getattr(tokenizer, "chat_template", None):
        turns = ([{"role": "system", "content": prompt.system}] if prompt.system else []) + \
            [{"role": "user", "content": message}]
        return tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True)
    system = f"{prompt.system}\n\n" if prompt.system else ""
    return f"{system}Question: {message}\nAnswer:"
