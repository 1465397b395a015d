"""The ranks of a data-parallel job, and the few collectives the trainer needs.

The DeepSpeed launcher starts one process per rank with RANK, WORLD_SIZE and
LOCAL_RANK in the environment; `python stages/train.py` alone is a job of one.
Collectives go through torch.distributed (gloo on CPU, NCCL on CUDA) and are
no-ops for a job of one, so single-process code pays nothing for them.
"""

from __future__ import annotations

import datetime
import os
import socket
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Ranks:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def device(self) -> torch.device:
        """This rank's device: GPU LOCAL_RANK of its node (every GPU stays
        visible, as vLLM's external launcher expects), or the CPU."""
        return torch.device("cuda", self.local_rank) if torch.cuda.is_available() else torch.device("cpu")

    def share(self, items: list, chunk: int) -> list:
        """This rank's part of `items`: of every consecutive `chunk` items, the
        rank-th slice of chunk / world. With chunk = the mini-batch, the ranks'
        parts of one mini-batch are exactly the one-rank mini-batch, split."""
        if chunk % self.world or len(items) % chunk:
            raise ValueError(f"{len(items)} items in chunks of {chunk} do not split over {self.world} ranks")
        part = chunk // self.world
        return [x for start in range(0, len(items), chunk)
                for x in items[start + self.rank * part : start + (self.rank + 1) * part]]


def ranks_from_env() -> Ranks:
    env = os.environ
    return Ranks(int(env.get("RANK", 0)), int(env.get("WORLD_SIZE", 1)), int(env.get("LOCAL_RANK", 0)))


def _free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def cpu_threads(ranks_per_node: int) -> list[int]:
    """The cores of this rank when several ranks share a CPU node (disjoint sets)."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    local = int(os.environ.get("LOCAL_RANK", 0))
    per = max(1, len(cores) // ranks_per_node)
    return cores[local * per : (local + 1) * per] or cores[:1]


def init(timeout_s: float = 1800.0) -> Ranks:
    """Join the job's process group (a group of one without a launcher)."""
    for key, value in {"MASTER_ADDR": "127.0.0.1", "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"}.items():
        os.environ.setdefault(key, value)
    os.environ.setdefault("MASTER_PORT", _free_port())
    ranks = ranks_from_env()
    if torch.cuda.is_available():
        # Before anything touches CUDA: the trainer, NCCL and this rank's vLLM
        # engine (external launcher: it also takes LOCAL_RANK) share this GPU.
        torch.cuda.set_device(ranks.device)
    import deepspeed
    from deepspeed.utils import groups

    # A process group made and destroyed earlier in this process (a CPU vLLM engine's shutdown destroys
    # the default group behind DeepSpeed's back) leaves DeepSpeed's clone of it cached: the next
    # deepspeed.initialize would broadcast over a group torch no longer knows, also when a new
    # default group exists by then. A live clone is kept (making another is a collective).
    registered = torch.distributed.distributed_c10d._world.pg_map
    if any(g is not None and g not in registered for g in (groups._WORLD_GROUP, groups._DATA_PARALLEL_GROUP)):
        groups._release_process_group_references()
    if torch.distributed.is_initialized():
        return ranks
    skip_cpu_shm_op()
    deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo",
                               timeout=datetime.timedelta(seconds=timeout_s), verbose=False)
    return ranks


def skip_cpu_shm_op() -> None:
    """Keep DeepSpeed's CPU backend from compiling its shared-memory all-reduce.
    Called before anything that may start DeepSpeed's communication backend
    (init_distributed, or deepspeed.initialize without a process group).

    On the CPU accelerator, that backend JIT-compiles a C++ op
    (deepspeed.comm.torch.build_shm_op) that only its inference all-reduce
    uses: 25 s on 2 cores at a machine's first run, a compiler required, and a
    run killed during the build leaves torch's build lock behind, on which every
    later init on that machine waits forever (torch.utils.file_baton has no
    timeout). Marked incompatible, the op is not built; training collectives
    are gloo's either way. On CUDA the builder does not exist: nothing changes."""
    import deepspeed.ops

    if not torch.cuda.is_available():
        deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False


def _active() -> bool:
    return torch.distributed.is_available() and torch.distributed.is_initialized() \
        and torch.distributed.get_world_size() > 1


def gather(obj) -> list:
    """Every rank's `obj`, in rank order, on every rank (picklable objects)."""
    if not _active():
        return [obj]
    out = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(out, obj)
    return out


class _GatherRows(torch.autograd.Function):
    """Every rank's rows of a tensor, concatenated in rank order, with gradient:
    each rank computes the same loss of the gathered rows, so a row's gradient
    is the sum over ranks of that loss's gradient, and its own rank takes it
    (torch.distributed.nn's all_gather, written with an all-reduce, which gloo
    has, instead of a reduce-scatter, which it has not)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        world = torch.distributed.get_world_size()
        ctx.rank, ctx.rows = torch.distributed.get_rank(), x.shape[0]
        parts = [torch.empty_like(x) for _ in range(world)]
        torch.distributed.all_gather(parts, x.contiguous())
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        grad = grad.contiguous().clone()
        torch.distributed.all_reduce(grad, op=torch.distributed.ReduceOp.SUM)
        return grad[ctx.rank * ctx.rows : (ctx.rank + 1) * ctx.rows]


def gather_rows(x: torch.Tensor) -> torch.Tensor:
    """[rows, ...] of every rank (each the same number of rows), in rank order;
    differentiable (see _GatherRows). One rank: `x` itself."""
    return _GatherRows.apply(x) if _active() else x


def all_sum(values: list[float]) -> list[float]:
    if not _active():
        return list(values)
    t = torch.tensor(values, dtype=torch.float64, device=_device())
    torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.SUM)
    return t.tolist()


def all_max(value: int) -> int:
    """The largest `value` of any rank, on every rank."""
    if not _active():
        return value
    t = torch.tensor([float(value)], device=_device())
    torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
    return int(t.item())


def any_rank(flag: bool) -> bool:
    """True on every rank if it is true on any (e.g. a stop signal one rank got)."""
    return bool(all_max(int(flag)))


def barrier() -> None:
    if _active():
        torch.distributed.barrier()


def close() -> None:
    """Leave the process group (torch asks for it before exit; NCCL may hang otherwise)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def _device() -> torch.device:
    """Where a collective's tensor must be: NCCL reduces on the rank's GPU."""
    return ranks_from_env().device if torch.distributed.get_backend() == "nccl" else torch.device("cpu")


def share_cpu_cores(ranks: Ranks, procs_per_node: int) -> None:
    """CPU ranks of one node split its cores, so they do not oversubscribe it
    (torch's threads and vLLM's OpenMP binding); nothing on a GPU or one rank."""
    if torch.cuda.is_available() or ranks.world == 1:
        return
    cores = cpu_threads(procs_per_node)
    torch.set_num_threads(len(cores))
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", ",".join(map(str, cores)))
