"""What a training run writes, as the Trainer's methods (rlvr.training.trainer): its
checkpoints, its step log and MLflow rows, the best-on-validation snapshots,
and the final model. Rank 0 writes the files; checkpoints and the HF exports
are collective (ZeRO-3 gathers the weights on every rank).
"""

from __future__ import annotations

from pathlib import Path

from rlvr import distributed
from rlvr.training import checkpoint
from rlvr.training.engine import full_weights


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
    """Mixed into Trainer: reads its engine, ranks, run files and state."""

    def _record(self, row: dict, groups: list | None = None) -> None:
        """Append to steps.csv and MLflow (with a few of the step's completions), on rank 0."""
        if not self.ranks.main:
            return
        self.step_log.append(row)
        shown = self.params.tracking.log_completions if self.tracker.enabled else 0
        self.tracker.log_step(row, completion_rows(groups or [], self.tokenizer, shown, int(row["step"])))

    def history(self) -> list[dict[str, float]]:
        """Every recorded step of this run, resumed ones included, as numbers."""
        return self.step_log.history()

    def _truncate_steps(self, last_step: int) -> None:
        if self.ranks.main:
            self.step_log.truncate(last_step)

    def _save(self, step: int | None) -> None:
        step = step if step is not None else self._last_step()
        checkpoint.save(self.ds_engine, self.ckpt_dir, {
            "step": step, "data_position": self.sampler.position, "entropy_anchor": self.anchor,
            "params_hash": self.hash, "identity": self.identity, "method": self.method.name, "world": self.ranks.world,
            "best": self.best, "tracking_run_id": self.tracker.run_id,
        }, self.ranks)
        self.saved_step = step

    def _last_step(self) -> int:
        last = self.step_log.last_step() if self.ranks.main else 0
        return int(distributed.all_sum([float(last)])[0])

    def _save_hf(self, out_dir: Path) -> None:
        from rlvr.model import save_checkpoint

        with full_weights(self.ds_engine, self.settings.zero_stage):  # ZeRO-3: every rank takes part
            if self.ranks.main:
                save_checkpoint(self.ds_engine.module, self.tokenizer, out_dir)
        distributed.barrier()

    def save_snapshot(self, step: int) -> None:
        """An HF snapshot of the best step so far, marked with its identity. Collective."""
        self._save_hf(self.snapshots.dir(step))
        if self.ranks.main:
            self.snapshots.mark(step)

    def prune_snapshots(self) -> None:
        """Delete the snapshots that can no longer be chosen (rank 0)."""
        if self.ranks.main:
            self.snapshots.prune(self.best["step"] if self.best else None)

    def _save_final(self) -> None:
        """The trained weights as a plain HF checkpoint, the best-on-validation
        snapshot linked beside it when it is an earlier step, and their list
        (what the evaluate stage scores with the full protocol)."""
        self._save_hf(self.final_dir)
        if self.ranks.main:
            self.snapshots.link_into(self.final_dir, self.best, self.settings.steps, self._validation_scores())

    def _validation_scores(self) -> dict[int, float]:
        return {int(r["step"]): r["val_avg@k"] for r in self.history() if "val_avg@k" in r}
