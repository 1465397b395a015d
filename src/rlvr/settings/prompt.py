"""The prompt: how a problem becomes the model's input (evaluation's, and
training's where it differs), where the answer is read, and its rules."""

from __future__ import annotations

from dataclasses import dataclass, field

PROBLEM = "{problem}"  # where the problem goes in prompt.user


DATASET_SYSTEM = "{dataset_system}"  # in a system turn: the training set's own (Openr1-Math-46k: LUFFY's)


@dataclass
class TrainPromptParams:
    """Training's prompt where it differs from evaluation's: an unset key keeps
    prompt's value; `system: ""` trains without a system turn."""

    user: str | None = None  # training's user turn (null: prompt.user)
    system: str | None = None  # training's system turn (null: prompt.system; {dataset_system}: the training set's own)
    chat_template: bool | None = None  # null: prompt.chat_template


@dataclass
class PromptParams:
    """How a problem becomes the model's input, and where its answer is read.
    These keys are evaluation's prompt, and training's unless `train` says otherwise."""

    # the user turn; {problem} is replaced by the problem
    user: str = PROBLEM + "\nPlease reason step by step, and put your final answer within \\boxed{}."
    system: str | None = None  # a system turn before the user turn (SIREN's Qwen-math prompt)
    chat_template: bool = True  # through the tokenizer's chat template, generation prompt added
    answer_after: str | None = None  # grade only the text between this marker and the next (R1-distill: "</think>")
    train: TrainPromptParams = field(default_factory=TrainPromptParams)

    def for_training(self) -> "PromptParams":
        """The prompt the policy is trained (and validated) on: these keys with `train`'s applied."""
        t = self.train
        return PromptParams(user=self.user if t.user is None else t.user,
                            system=self.system if t.system is None else t.system,
                            chat_template=self.chat_template if t.chat_template is None else t.chat_template,
                            answer_after=self.answer_after)


def check_prompt(prompt: PromptParams, problems: list[str]) -> None:
    training = prompt.for_training()
    for where, user in (("prompt.user", prompt.user), ("prompt.train.user", training.user)):
        if user.count(PROBLEM) != 1:
            problems.append(f"'{where}' must contain {PROBLEM} exactly once, got {user!r}")
    if DATASET_SYSTEM in (prompt.system or ""):
        problems.append(f"'prompt.system' uses {DATASET_SYSTEM}, which only training sets carry (Openr1-Math-46k): "
                        "put it under prompt.train.system")
    if DATASET_SYSTEM in (training.system or "") and training.system != DATASET_SYSTEM:
        problems.append(f"'prompt.train.system' must be {DATASET_SYSTEM} alone (the dataset's own turn), "
                        f"got {training.system!r}")
