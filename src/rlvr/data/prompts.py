"""Prompt construction: the model's chat template around one fixed instruction."""

from __future__ import annotations

INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


def user_message(problem: str) -> str:
    return f"{problem}\n{INSTRUCTION}"


def build_prompt(problem: str, tokenizer=None) -> str:
    """The text fed to the model for one problem.

    With a tokenizer that has a chat template (SmolLM2-Instruct, the
    DeepSeek-R1-Distill models), the problem goes in one user turn and the
    assistant turn is opened; without one, a plain completion prompt.
    """
    message = user_message(problem)
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(
            [{"role": "user", "content": message}], tokenize=False, add_generation_prompt=True
        )
    return f"Question: {message}\nAnswer:"
