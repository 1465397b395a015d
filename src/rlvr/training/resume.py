"""Which checkpoint a run resumes from: its own where it was made from the run's
inputs; one set aside earlier that matches them again; none, the other set aside
(a fresh start) until the new run's first checkpoint. A damaged one is named and
refused unless a fresh start is asked for."""

from __future__ import annotations

from pathlib import Path

from rlvr import distributed
from rlvr.atomic import remove_dir
from rlvr.schema import settings_hash
from rlvr.training.checkpoint import DamagedCheckpoint, StaleCheckpoint, check_files, read_state


def fresh_hint(method: str, seed: int) -> str:
    """How to start a run afresh over a damaged checkpoint."""
    return (f"restore it and rerun to resume, or start this run afresh with `python stages/train.py --method {method} "
            f"--seed {seed} --fresh` (it and the step log are set aside, not deleted)")


def usable_state(ckpt_dir: Path, identity: dict[str, str], fresh_on_change: bool, say,
                 set_aside: tuple[Path, ...] = (), fresh_if_damaged: bool = False, fix: str = "") -> dict | None:
    """The checkpoint's state if it can be resumed, else None (a fresh start).

    - One made from these inputs (`identity`: run_identity's) is resumed; when there is
      none but the checkpoint set aside earlier (`<dir>.stale`) was made from them (the
      inputs changed back), that one comes back with its snapshots and step log.
    - One made from other inputs is refused, naming the inputs that changed, or
      (`fresh_on_change`) set aside with the run's other files (`set_aside`: the
      checkpoint, snapshots, step log) until the new run's first checkpoint: a run that
      fails before it gets them back (restore_aside).
    - A damaged one (a file missing, empty or unreadable) is refused, naming the file and
      `fix`; with `fresh_if_damaged` (asked for: --fresh) it is set aside the same way."""
    try:
        state = read_state(ckpt_dir)
        if state is not None:
            check_files(ckpt_dir)
    except DamagedCheckpoint as e:
        if not fresh_if_damaged:
            raise DamagedCheckpoint(f"the checkpoint {ckpt_dir} is damaged: {e}; the run does not start from it: "
                                    f"{fix}") from None
        say(f"the checkpoint {ckpt_dir} is damaged ({e}): starting fresh as asked; it waits in "
            f"{aside(ckpt_dir)} until the new run's first checkpoint")
        _put_aside(ckpt_dir, set_aside)
        return None
    current = settings_hash(identity)
    if state is not None and state.get("params_hash") == current:
        return state
    kept = _aside_state(ckpt_dir)
    if kept is not None and kept.get("params_hash") == current:
        say(f"the checkpoint set aside in {aside(ckpt_dir)} (step {kept.get('step')}) was made from these inputs: "
            "resuming it" + (" (the other one takes its place aside)" if state is not None else ""))
        if distributed.ranks_from_env().main:
            for path in dict.fromkeys((ckpt_dir, *set_aside)):
                _swap(path, aside(path))
        distributed.barrier()
        return kept
    if state is None:
        return None
    saved = state.get("identity") or {}
    changed = [name for name, h in identity.items() if saved.get(name) != h]
    what = (f"{ckpt_dir} (step {state.get('step')}) was made with other "
            f"{', '.join(changed) or 'inputs (an earlier version of this trainer)'}")
    if not fresh_on_change:
        raise StaleCheckpoint(f"{what}: rerun with --fresh to start over (setting it and the step log aside), or "
                              "restore those inputs to resume it")
    say(f"{what}: starting fresh; it waits in {aside(ckpt_dir)} until the new run's first checkpoint")
    _put_aside(ckpt_dir, set_aside)
    return None


def _aside_state(ckpt_dir: Path) -> dict | None:
    """The state of the checkpoint set aside, where it is whole (else None: it never comes back)."""
    try:
        state = read_state(aside(ckpt_dir))
        if state is not None:
            check_files(aside(ckpt_dir))
        return state
    except DamagedCheckpoint:
        return None


def _put_aside(ckpt_dir: Path, set_aside: tuple[Path, ...]) -> None:
    if distributed.ranks_from_env().main:
        for path in dict.fromkeys((ckpt_dir, *set_aside)):
            _remove(aside(path))  # an older one set aside
            if path.exists():
                path.rename(aside(path))
    distributed.barrier()


def _swap(a: Path, b: Path) -> None:
    """`a` and `b` exchange places (either may be missing)."""
    between = a.with_name(a.name + ".swap")
    _remove(between)
    if a.exists():
        a.rename(between)
    if b.exists():
        b.rename(a)
    if between.exists():
        between.rename(b)


def aside(path: Path) -> Path:
    return path.with_name(path.name + ".stale")


def drop_aside(*paths: Path) -> None:
    """The new run has its own checkpoint: what was set aside goes (rank 0)."""
    for path in paths:
        _remove(aside(path))


def restore_aside(*paths: Path) -> bool:
    """The new run failed before its first checkpoint: what was set aside comes
    back, replacing what the new run began (rank 0). True if anything did."""
    back = [p for p in paths if aside(p).exists()]
    for path in back:
        _remove(path)
        aside(path).rename(path)
    return bool(back)


def _remove(path: Path) -> None:
    if path.is_dir():
        remove_dir(path)
    else:
        path.unlink(missing_ok=True)
