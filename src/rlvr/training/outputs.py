"""What a training run writes (rlvr.training.trainer holds one RunOutputs): its
checkpoints, its step log and MLflow rows, the best-on-validation snapshots,
and the final model. Rank 0 writes the files; checkpoints and the HF exports
are collective (ZeRO-3 gathers the weights on every rank).
"""

from __future__ import annotations

from pathlib import Path

from rlvr import distributed
from rlvr.run_files import Snapshots, StepLog
from rlvr.training import checkpoint, resume
from rlvr.training.deepspeed_engine import full_weights


def completion_rows(groups: list, tokenizer, n: int, step: int) -> list[dict]:
    """The first response of the first `n` groups of a step (this rank's), as
    TRL's completions table shows them, with what the grader read beside the
    whole completion (a reward hack shows as an extracted answer that is not
    the gold): problem, gold, extracted, reward, correct, completion."""
    rows = []
    for g in groups[:n]:
        rows.append({"step": step, "problem": g.record.problem[:500], "gold": g.record.answer,
                     "extracted": g.extracted[0] if g.extracted else "",
                     "reward": float(g.rewards[0]), "correct": bool(g.correct[0]),
                     "completion": tokenizer.decode(g.responses[0], skip_special_tokens=True),
                     "tokens": len(g.responses[0])})
    return rows


class RunOutputs:
    """A run's files and MLflow rows, with what writing them takes declared
    here; the trainer hands over its engine and state at each write."""

    def __init__(self, ranks: distributed.Ranks, step_log: StepLog, tracker, ckpt_dir: Path, final_dir: Path,
                 snapshots: Snapshots, zero_stage: int, log_completions: int):
        """`tracker`: a Tracker or NullTracker; `log_completions`: completions
        per step in MLflow's table (0: none)."""
        self.ranks, self.step_log, self.tracker = ranks, step_log, tracker
        self.ckpt_dir, self.final_dir, self.snapshots = ckpt_dir, final_dir, snapshots
        self.zero_stage, self.log_completions = zero_stage, log_completions
        self.tokenizer = None  # set once the trainer loads it: the completions table decodes with it

    def record(self, row: dict, groups: list | None = None) -> None:
        """Append to steps.csv and MLflow (with a few of the step's completions), on rank 0."""
        if not self.ranks.main:
            return
        self.step_log.append(row)
        shown = self.log_completions if self.tracker.enabled else 0
        self.tracker.log_step(row, completion_rows(groups or [], self.tokenizer, shown, int(row["step"])))

    def history(self) -> list[dict[str, float]]:
        """Every recorded step of this run, resumed ones included, as numbers."""
        return self.step_log.history()

    def truncate_steps(self, last_step: int) -> None:
        if self.ranks.main:
            self.step_log.truncate(last_step)

    def save_checkpoint(self, engine, state: dict) -> None:
        """The engine's weights and optimizer with the trainer's `state`; a stale
        checkpoint set aside (rlvr.training.resume) goes once it exists. Collective."""
        checkpoint.save(engine, self.ckpt_dir, state, self.ranks)
        if self.ranks.main:
            resume.drop_aside(*self.set_aside)

    @property
    def set_aside(self) -> tuple[Path, ...]:
        """What a fresh start sets aside until its first checkpoint: the checkpoint, snapshots, step log."""
        return self.ckpt_dir, self.snapshots.root, self.step_log.path

    def last_step(self) -> int:
        """The last recorded step, which rank 0 alone knows, on every rank."""
        last = self.step_log.last_step() if self.ranks.main else 0
        return int(distributed.all_sum([float(last)])[0])

    def save_hf(self, engine, out_dir: Path) -> None:
        from rlvr.model import save_checkpoint

        with full_weights(engine, self.zero_stage):  # ZeRO-3: every rank takes part
            if self.ranks.main:
                save_checkpoint(engine.module, self.tokenizer, out_dir)
        distributed.barrier()

    def save_snapshot(self, engine, step: int) -> None:
        """An HF snapshot of the best step so far, marked with its identity. Collective."""
        self.save_hf(engine, self.snapshots.dir(step))
        if self.ranks.main:
            self.snapshots.mark(step)

    def prune_snapshots(self, best: dict | None) -> None:
        """Delete the snapshots that can no longer be chosen (rank 0)."""
        if self.ranks.main:
            self.snapshots.prune(best["step"] if best else None)

    def save_final(self, engine, best: dict | None, steps: int) -> None:
        """The trained weights as a plain HF checkpoint, the best-on-validation
        snapshot linked beside it when it is an earlier step, and their list
        (what the evaluate stage scores with the full protocol)."""
        self.save_hf(engine, self.final_dir)
        if self.ranks.main:
            self.snapshots.link_into(self.final_dir, best, steps, self.validation_scores())

    def validation_scores(self) -> dict[int, float]:
        return {int(r["step"]): r["val_avg@k"] for r in self.history() if "val_avg@k" in r}
