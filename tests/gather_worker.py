"""Run by tests/objectives/test_objective_contract.py on 2 gloo ranks: each rank takes
half of the contract's mini-batch (rows 0-5, 6-11: groups split across the
ranks) and computes every whole-group objective's loss on its half with the
call's rows gathered (rlvr.distributed.gather_rows), then saves its loss and
the gradient of its log-probs."""

import dataclasses
import os
import sys

import torch
from helpers import mini_batch, needed_only

from rlvr import distributed
from rlvr.objectives.base import MiniBatchTotals
from rlvr.objectives.registry import examples, objective


def main(out: str) -> None:
    torch.distributed.init_process_group("gloo")
    rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    results = {}
    for name, i, hp in examples():
        if not hp.needs().whole_groups:
            continue
        whole = needed_only(mini_batch(), hp.needs())
        rows = whole.mask.shape[0] // world
        idx = slice(rank * rows, (rank + 1) * rows)
        totals = MiniBatchTotals(responses=whole.mask.shape[0], tokens=whole.mask.sum().item(),
                                 groups=whole.mask.shape[0] // whole.group_size)
        pick = lambda t: None if t is None else t[idx]  # noqa: E731
        mine = dataclasses.replace(whole, logp=whole.logp[idx], old_logp=whole.old_logp[idx], mask=whole.mask[idx],
                                   rewards=whole.rewards[idx], group_rewards=whole.group_rows()[idx],
                                   ref_logp=pick(whole.ref_logp), entropy=pick(whole.entropy),
                                   topp_entropy=pick(whole.topp_entropy), totals=totals,
                                   gather=distributed.gather_rows, gather_ranks=world)
        loss = objective(name).loss(mine, hp).loss
        (grad,) = torch.autograd.grad(loss, whole.logp)
        results[f"{name}-{i}"] = {"loss": loss.item(), "grad": grad[idx].clone()}
    torch.save(results, os.path.join(out, f"rank{rank}.pt"))
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
