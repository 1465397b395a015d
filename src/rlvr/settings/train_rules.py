"""The rules among a method's training settings, which the ranks, the
engine's context and the data bound: whole shares of each mini-batch per
rank, loss calls that hold their smallest item, a response that leaves room
for its prompt. The values come in as arguments, so the settings' modules
import each other one way only (sections -> train; train_rules -> call_plan -> train)."""

from __future__ import annotations

import math

from rlvr.settings.call_plan import CallPlan
from rlvr.settings.train import TrainParams


def check_train(where: str, t: TrainParams, world: int, max_model_len: int, validates: bool,
                problems: list[str]) -> None:
    """The rules among a method's training settings (`train:` with its
    overrides; each one's range: TrainParams.ranges), given the ranks
    (`world`), engine.max_model_len and whether the data holds problems out to
    validate on (DataParams.validates); those that depend on its objective are
    in rlvr.settings.methods."""
    if t.mini_batch_questions >= 1 and t.questions_per_step % t.mini_batch_questions:
        problems.append(f"'train.mini_batch_questions' ({t.mini_batch_questions}) must divide "
                        f"'train.questions_per_step' ({t.questions_per_step})")
    if t.sequences_per_call > 0 and t.max_tokens_per_call > 0:
        problems.append(f"'{where}': train.sequences_per_call ({t.sequences_per_call}) and max_tokens_per_call "
                        f"({t.max_tokens_per_call}) both size the loss calls: set one, the other 0")
    check_rank_shares(where, t, world, problems)
    check_token_budget(where, t, max_model_len, problems)
    if t.max_response_tokens >= max_model_len:
        problems.append(f"'train.max_response_tokens' ({t.max_response_tokens}) must be below "
                        f"'engine.max_model_len' ({max_model_len}), which must hold the prompt too")
    if t.eval_every and not validates:
        problems.append(f"'train.eval_every' ({t.eval_every}) validates on problems held out of the training "
                        "mixture: set data.validation_size (e.g. 128) or, training on arithmetic, "
                        "data.arithmetic.n_validation_per_level, or eval_every: 0")
    if t.overlong_buffer >= t.max_response_tokens:
        problems.append(f"'{where}.overlong_buffer' must be below train.max_response_tokens "
                        f"({t.max_response_tokens}), got {t.overlong_buffer}")


def check_rank_shares(where: str, t: TrainParams, world: int, problems: list[str], needs_groups: str = "") -> None:
    """Each rank takes an equal share of every mini-batch: whole questions, or,
    with token-budget calls and an objective that needs no whole group, an
    equal slice of its responses (CallPlan.shared).
    `needs_groups`: the objective that needs whole groups in every loss call
    (rlvr.settings.methods adds that rule; "" here, where objectives are unknown)."""
    m, n, ranks = t.mini_batch_questions, t.responses_per_question, f"the number of ranks ({world} = " \
        "launcher.procs_per_node x launcher.nodes)"
    if m < 1 or world < 1:
        return  # out of range: reported with its key
    if t.sequences_per_call > 0:
        rows = CallPlan(t, world, bool(needs_groups)).rows
        if (m * n) % (world * rows):
            whole = f" ({rows}: the calls of all ranks together hold whole groups of {needs_groups})" \
                if rows != t.sequences_per_call else ""
            problems.append(f"'{where}': a mini-batch's responses (mini_batch_questions x responses_per_question = "
                            f"{m * n}) must split into loss calls of {rows} responses{whole} on each of {ranks}")
        return
    if m % world == 0:
        if t.max_tokens_per_call <= 0 and (t.micro_batch_questions < 1 or (m // world) % t.micro_batch_questions):
            problems.append(f"'train.micro_batch_questions' ({t.micro_batch_questions}) must divide each rank's "
                            f"share of a mini-batch (mini_batch_questions / ranks = {m // world})")
    elif t.max_tokens_per_call <= 0:
        problems.append(f"'{where}': train.mini_batch_questions ({m}) must be a multiple of {ranks}: "
                        "loss calls of whole questions (train.max_tokens_per_call: 0)")
    elif needs_groups:
        problems.append(f"'{where}': train.mini_batch_questions ({m}) must be a multiple of {ranks}: "
                        f"{needs_groups} needs a question's responses in one loss call")
    elif (m * n) % world or t.questions_per_step % math.lcm(m, world):
        problems.append(f"'{where}': the ranks share each mini-batch's responses, so mini_batch_questions x "
                        f"responses_per_question ({m * n}) must be a multiple of {ranks}, and "
                        f"questions_per_step ({t.questions_per_step}) of {math.lcm(m, world)}")


def check_token_budget(where: str, t: TrainParams, max_model_len: int, problems: list[str],
                       needs_groups: str = "") -> None:
    """A loss call must hold its smallest item: one sequence of up to
    engine.max_model_len tokens, or, for an objective that needs whole groups
    (`needs_groups`, added by rlvr.settings.methods), a whole group of them (rlvr.training.loss_calls)."""
    if t.max_tokens_per_call <= 0:
        return
    need = max_model_len * (t.responses_per_question if needs_groups else 1)
    if t.max_tokens_per_call < need:
        what = (f"a whole group ({t.responses_per_question} x engine.max_model_len {max_model_len}; "
                f"{needs_groups} needs a question's responses in one call)" if needs_groups
                else f"one sequence (engine.max_model_len {max_model_len})")
        problems.append(f"'{where}': train.max_tokens_per_call ({t.max_tokens_per_call}) must hold {what}: "
                        f"set it to at least {need}")
