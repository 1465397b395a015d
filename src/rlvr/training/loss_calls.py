"""How one rank's share of a mini-batch is cut into loss calls.

A row is one response of a group: `(group, i)`. By `train.sequences_per_call`
(> 0: calls of that many responses, in the order the ranks' rows were laid
out, so the ranks' k-th calls together hold whole groups), else by
`train.max_tokens_per_call`:

- 0: `micro_batch_questions` whole groups per call, in order (the CPU default);
- N > 0: bins of at most N tokens as the forward pass sees them (rows x the
  bin's longest prompt plus its longest response, padding included; with
  `train.padding_free`, the sum of the rows' lengths), holding
  single responses, or whole groups for the objectives that need them
  (the objective's `needs().whole_groups`). verl's `ppo_max_token_len_per_gpu` with
  `use_dynamic_bsz` is the same budget.

Items are taken longest first and each bin is filled while it stays within
the budget, so rows of similar length share a bin (little padding) and every
call costs about the budget. All ranks make as many calls as the rank that
needs most: ZeRO-2 reduces gradients at every backward, so the ranks must
call it equally often (verl's data-parallel ranks agree on their number of
micro-batches the same way). A rank that needs fewer splits its largest bins
or, with nothing left to split, makes empty calls.
"""

from __future__ import annotations

from rlvr import distributed
from rlvr.rollout.groups import Group
from rlvr.settings.call_plan import CallPlan

Row = tuple[Group, int]


def rows_of(groups: list[Group]) -> list[Row]:
    return [(g, i) for g in groups for i in range(len(g.responses))]


def row_tokens(row: Row) -> int:
    g, i = row
    return len(g.prompt_ids) + len(g.responses[i])


def padded_tokens(rows: list[Row]) -> int:
    """Tokens a forward pass over `rows` processes: prompts are left-padded to
    the longest prompt and responses right-padded to the longest response."""
    if not rows:
        return 0
    return len(rows) * (max(len(g.prompt_ids) for g, _ in rows) + max(len(g.responses[i]) for g, i in rows))


def real_tokens(rows: list[Row]) -> int:
    """Tokens a padding-free forward pass over `rows` processes."""
    return sum(row_tokens(r) for r in rows)


def fill_bins(items: list[list[Row]], budget: int, cost=padded_tokens) -> list[list[list[Row]]]:
    """Items (lists of rows kept together), longest first, into bins of at most
    `budget` tokens by `cost`. An item over the budget alone is an error: the
    config check (rlvr.settings.sections) rules it out before training starts."""
    bins: list[list[list[Row]]] = []
    for item in sorted(items, key=lambda it: -max(row_tokens(r) for r in it)):
        if cost(item) > budget:
            raise ValueError(f"one loss-call item of {cost(item)} tokens exceeds "
                             f"train.max_tokens_per_call ({budget})")
        if bins and cost([r for it in bins[-1] for r in it] + item) <= budget:
            bins[-1].append(item)
        else:
            bins.append([item])
    return bins


def split_to(bins: list[list[list[Row]]], k: int) -> list[list[list[Row]]]:
    """`bins` made into exactly k (k >= len(bins)): halve the bin with the most
    items (alternate items, so both halves keep its length mix) until there are
    k, then add empty calls if no bin has two items left."""
    bins = [b for b in bins]
    while len(bins) < k:
        largest = max(range(len(bins)), key=lambda j: len(bins[j]), default=None)
        if largest is None or len(bins[largest]) < 2:
            bins.append([])
            continue
        b = bins.pop(largest)
        bins[largest:largest] = [b[0::2], b[1::2]]
    return bins


def plan_calls(rows: list[Row], plan: CallPlan, agree: bool = True) -> list[list[Row]]:
    """This rank's loss calls over `rows` (its part of one mini-batch, laid
    out as `plan` says: with `plan.whole_groups`, every group's rows together
    and in order; with `plan.rows`, call by call). `agree`: all ranks make the
    same number of calls (a collective; the gradient-free pi_old pass needs no
    agreement)."""
    train, n = plan.train, plan.train.responses_per_question
    if plan.rows > 0:
        return [rows[i : i + plan.rows] for i in range(0, len(rows), plan.rows)]
    if not plan.by_tokens:
        size = train.micro_batch_questions * n
        return [rows[i : i + size] for i in range(0, len(rows), size)]
    items = [rows[i : i + n] for i in range(0, len(rows), n)] if plan.whole_groups else [[r] for r in rows]
    bins = fill_bins(items, train.max_tokens_per_call, real_tokens if train.padding_free else padded_tokens)
    k = distributed.all_max(len(bins)) if agree else len(bins)
    return [[r for item in b for r in item] for b in split_to(bins, k)]
