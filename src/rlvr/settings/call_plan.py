"""How a mini-batch is cut into loss calls: one answer, from the training
settings, the number of ranks and whether the objective compares a group's
responses (`needs().whole_groups`). The settings' checks, the ranks' shares
of the rollouts (rlvr.rollout.groups), the update and its calls
(rlvr.training.loss_calls) and the memory budget (rlvr.tools.memory) all ask
it; none computes a call's size itself."""

from __future__ import annotations

from dataclasses import dataclass

from rlvr.settings.train import TrainParams


@dataclass(frozen=True)
class CallPlan:
    train: TrainParams
    world: int = 1  # ranks
    needs_groups: bool = False  # the objective compares a group's responses inside a loss call

    @property
    def rows(self) -> int:
        """Responses per loss call on each rank when calls are sized by count
        (train.sequences_per_call > 0): its value, or, for an objective that
        compares a group's responses, the smallest multiple of it whose calls
        on all ranks together hold whole groups (DisCO's 4 of 8 on 8 GPUs: 4,
        four groups per call; on one GPU: 8, one group). 0: calls of whole
        questions (micro_batch_questions) or token bins (max_tokens_per_call)."""
        t, rows = self.train, self.train.sequences_per_call
        while rows > 0 and self.needs_groups and (self.world * rows) % t.responses_per_question:
            rows += t.sequences_per_call
        return rows

    @property
    def by_tokens(self) -> bool:
        """Calls are bins of at most train.max_tokens_per_call tokens."""
        return self.rows == 0 and self.train.max_tokens_per_call > 0

    @property
    def whole_groups(self) -> bool:
        """A call keeps each group's responses together and in order: calls of
        micro_batch_questions whole questions, or an objective that needs it."""
        return self.train.max_tokens_per_call <= 0 or self.needs_groups

    @property
    def shared(self) -> bool:
        """The ranks share each mini-batch's responses, not its questions: a
        mini-batch of fewer questions than ranks, or calls sized by count (the
        ranks' k-th calls together hold whole groups)."""
        return self.train.mini_batch_questions % self.world != 0 or self.train.sequences_per_call > 0

    @property
    def gathered(self) -> bool:
        """A call's scores are gathered over the ranks (DisCO's official grain)."""
        return self.rows > 0 and self.world > 1

    @property
    def most_rows(self) -> int:
        """The most responses one call holds when sized by count (what the
        memory budget multiplies): `rows`, or micro_batch_questions whole groups."""
        return self.rows or self.train.micro_batch_questions * self.train.responses_per_question
