"""Checkpoint writes are atomic: a kill at any point leaves a usable checkpoint."""

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from rlvr.training import checkpoint


class FileEngine:
    """Writes what DeepSpeed's save_checkpoint would, as plain files (the real
    engine is exercised by test_trainer's kill/resume tests)."""

    def __init__(self, payload: str = "weights"):
        self.payload = payload

    def save_checkpoint(self, d, tag):
        os.makedirs(os.path.join(d, tag), exist_ok=True)
        with open(os.path.join(d, tag, "model.pt"), "w") as f:
            f.write(self.payload)

    def load_checkpoint(self, d, tag):
        with open(os.path.join(d, tag, "model.pt")) as f:
            self.payload = f.read()


def test_save_and_load_round_trip(tmp_path):
    ck = tmp_path / "checkpoint"
    checkpoint.save(FileEngine("v1"), ck, {"step": 3, "params_hash": "h"})
    eng = FileEngine("")
    assert checkpoint.load(eng, ck)["step"] == 3 and eng.payload == "v1"


def test_partial_write_leaves_previous_checkpoint(tmp_path):
    ck = tmp_path / "checkpoint"
    checkpoint.save(FileEngine("v1"), ck, {"step": 2})
    # a kill while writing step 4: the .tmp directory is half written
    (tmp_path / "checkpoint.tmp" / checkpoint.TAG).mkdir(parents=True)
    assert checkpoint.read_state(ck)["step"] == 2
    # a kill between the two renames: only .old holds a complete checkpoint
    os.replace(ck, tmp_path / "checkpoint.old")
    assert checkpoint.read_state(ck)["step"] == 2
    # the next save clears the leftovers
    checkpoint.save(FileEngine("v2"), ck, {"step": 4})
    assert checkpoint.read_state(ck)["step"] == 4
    assert not (tmp_path / "checkpoint.tmp").exists() and not (tmp_path / "checkpoint.old").exists()


class FullDisk(FileEngine):
    """Fails as a write to a full disk does: with the errno, or as torch says it (no errno)."""

    def __init__(self, error: Exception):
        super().__init__()
        self.error = error

    def save_checkpoint(self, d, tag):
        super().save_checkpoint(d, tag)  # a part is written, then the disk is full
        raise self.error


@pytest.mark.parametrize("error", [OSError(errno.ENOSPC, "No space left on device"),
                                   RuntimeError("PytorchStreamWriter failed writing file data/0: file write failed")])
def test_a_full_disk_names_itself_and_keeps_the_previous_checkpoint(tmp_path, error):
    ck = tmp_path / "checkpoint"
    checkpoint.save(FileEngine("v1"), ck, {"step": 2})
    with pytest.raises(checkpoint.CheckpointWriteFailed) as failed:
        checkpoint.save(FullDisk(error), ck, {"step": 4})
    said = str(failed.value)
    assert f"no space left on the disk of {tmp_path}" in said and "GiB free" in said
    assert "the previous checkpoint (step 2) is intact" in said and said.endswith("free space and rerun to resume")
    assert not (tmp_path / "checkpoint.tmp").exists()  # the half-written copy's space is back
    eng = FileEngine("")
    assert checkpoint.load(eng, ck)["step"] == 2 and eng.payload == "v1"
    assert failed.value.exit_status == 4


def test_another_write_error_is_named_as_it_is(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint, "LOW_DISK", 0)  # whatever this disk has free
    with pytest.raises(checkpoint.CheckpointWriteFailed, match=r"PermissionError: denied \(.* GiB free\); no earlier checkpoint exists; fix that"):
        checkpoint.save(FullDisk(PermissionError("denied")), tmp_path / "checkpoint", {"step": 1})


def test_sigkill_during_checkpoint_write(tmp_path):
    """A real process killed in the middle of a (slow) checkpoint write."""
    script = tmp_path / "writer.py"
    script.write_text(textwrap.dedent(f"""
        import os, sys, time
        from rlvr.training import checkpoint
        class Slow:
            def save_checkpoint(self, d, tag):
                os.makedirs(os.path.join(d, tag))
                open(os.path.join(d, tag, "part"), "w").write("x")
                print("writing", flush=True)
                time.sleep(60)
        checkpoint.save(Slow(), {str(tmp_path / 'checkpoint')!r}, {{"step": 9}})
    """))
    checkpoint.save(FileEngine("good"), tmp_path / "checkpoint", {"step": 5})
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    state = checkpoint.read_state(tmp_path / "checkpoint")
    assert state["step"] == 5
    eng = FileEngine("")
    checkpoint.load(eng, tmp_path / "checkpoint")
    assert eng.payload == "good"


def test_settings_hash_changes_with_params():
    from rlvr.schema import settings_hash

    assert settings_hash({"lr": 1e-5}) == settings_hash({"lr": 1e-5})
    assert settings_hash({"lr": 1e-5}) != settings_hash({"lr": 2e-5})
    json.dumps(settings_hash({"a": [1, 2]}))


def test_a_leftover_old_copy_does_not_block_the_next_save(tmp_path):
    """A kill after the new checkpoint was renamed in but before .old was removed."""
    ck = tmp_path / "checkpoint"
    checkpoint.save(FileEngine("v1"), ck, {"step": 1})
    (tmp_path / "checkpoint.old" / "state").mkdir(parents=True)
    (tmp_path / "checkpoint.old" / "state" / "model.pt").write_text("stale")
    checkpoint.save(FileEngine("v2"), ck, {"step": 2})
    assert checkpoint.read_state(ck)["step"] == 2 and not (tmp_path / "checkpoint.old").exists()


def test_disk_per_run_by_hand():
    """1e9 bf16 parameters: model 2 GB, checkpoint 2 + 12 = 14 GB. With
    validation every 10 of 30 steps: the checkpoint, the best snapshot (one
    file in runs/, models/ and the cache) and the final model, 18 GB; a save
    adds a checkpoint and a waiting snapshot (34 GB). Keeping the snapshots of steps
    10 and 20 and the final model, each in runs/ or models/ and once more in a
    copying cache: 14 + 2 x 2 x 3 = 26 GB."""
    from rlvr.run_files import disk_per_run
    from rlvr.settings.train import TrainParams

    d = disk_per_run(10**9, TrainParams(steps=30, eval_every=10, bf16=True))
    assert {k: v / 1e9 for k, v in d.items()} == {"model": 2, "checkpoint": 14, "steady": 18, "peak": 34,
                                                  "every_snapshot": 26}
    d = disk_per_run(10**9, TrainParams(steps=30, eval_every=0, bf16=False))  # float32, no validation
    assert {k: v / 1e9 for k, v in d.items()} == {"model": 4, "checkpoint": 16, "steady": 20, "peak": 36,
                                                  "every_snapshot": 24}


def test_a_stale_checkpoint_is_set_aside_until_the_new_runs_first_and_back_if_it_fails(tmp_path):
    ck, snaps, steps = tmp_path / "checkpoint", tmp_path / "snapshots", tmp_path / "steps.csv"
    checkpoint.save(FileEngine("old"), ck, {"step": 10, "params_hash": "old", "identity": {"training settings": "a"}})
    snaps.mkdir()
    steps.write_text("step\n1\n")
    said = []
    state = checkpoint.usable_state(ck, {"training settings": "b"}, True, said.append, (ck, snaps, steps))
    assert state is None and said[0].endswith(f"starting fresh; it waits in {tmp_path}/checkpoint.stale until the "
                                              "new run's first checkpoint")
    assert not ck.exists() and not snaps.exists() and not steps.exists()
    steps.write_text("step\n1\n2\n")  # the new run began, then failed before its first checkpoint
    assert checkpoint.restore_aside(ck, snaps, steps)
    assert checkpoint.read_state(ck)["step"] == 10 and snaps.is_dir() and steps.read_text() == "step\n1\n"
    checkpoint.usable_state(ck, {"training settings": "b"}, True, said.append, (ck, snaps, steps))
    checkpoint.save(FileEngine("new"), ck, {"step": 1})  # its first checkpoint: what was set aside goes
    checkpoint.drop_aside(ck, snaps, steps)
    assert not any(p.name.endswith(".stale") for p in tmp_path.iterdir())
    assert not checkpoint.restore_aside(ck, snaps, steps) and checkpoint.read_state(ck)["step"] == 1
