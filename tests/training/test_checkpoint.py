"""Checkpoint writes are atomic: a kill at any point leaves a usable checkpoint."""

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
import torch

from rlvr.schema import settings_hash
from rlvr.training import checkpoint, resume


class FileEngine:
    """Writes what DeepSpeed's save_checkpoint would, as plain files (the real
    engine is exercised by test_trainer's kill/resume tests)."""

    def __init__(self, payload: str = "weights"):
        self.payload = payload

    def save_checkpoint(self, d, tag):
        os.makedirs(os.path.join(d, tag), exist_ok=True)
        torch.save({"payload": self.payload}, os.path.join(d, tag, "model.pt"))

    def load_checkpoint(self, d, tag):
        self.payload = torch.load(os.path.join(d, tag, "model.pt"))["payload"]


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
    needed = sum(f.stat().st_size for f in ck.rglob("*") if f.is_file())  # the previous checkpoint's size
    assert f"no space left on the disk of {tmp_path}" in said
    assert f"GiB free, a checkpoint needs about {needed / 2**30:.2f} GiB)" in said
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
        from rlvr.training import checkpoint, resume
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
    state = resume.usable_state(ck, {"training settings": "b"}, True, said.append, (ck, snaps, steps))
    assert state is None and said[0].endswith(f"starting fresh; it waits in {tmp_path}/checkpoint.stale until the "
                                              "new run's first checkpoint")
    assert not ck.exists() and not snaps.exists() and not steps.exists()
    steps.write_text("step\n1\n2\n")  # the new run began, then failed before its first checkpoint
    assert resume.restore_aside(ck, snaps, steps)
    assert checkpoint.read_state(ck)["step"] == 10 and snaps.is_dir() and steps.read_text() == "step\n1\n"
    resume.usable_state(ck, {"training settings": "b"}, True, said.append, (ck, snaps, steps))
    checkpoint.save(FileEngine("new"), ck, {"step": 1})  # its first checkpoint: what was set aside goes
    resume.drop_aside(ck, snaps, steps)
    assert not any(p.name.endswith(".stale") for p in tmp_path.iterdir())
    assert not resume.restore_aside(ck, snaps, steps) and checkpoint.read_state(ck)["step"] == 1


def test_a_set_aside_checkpoint_made_from_the_inputs_again_is_resumed(tmp_path):
    """Change a setting: the step-10 checkpoint goes aside; the new run is killed (-9) before
    its first checkpoint, leaving its own step log; the setting changed back: the rerun
    resumes the old checkpoint with its snapshots and step log, the new run's log aside."""
    ck, snaps, steps = tmp_path / "checkpoint", tmp_path / "snapshots", tmp_path / "steps.csv"
    old = {"training settings": "a"}
    checkpoint.save(FileEngine("old"), ck, {"step": 10, "params_hash": settings_hash(old), "identity": old})
    snaps.mkdir()
    steps.write_text("step\n1\n10\n")
    assert resume.usable_state(ck, {"training settings": "b"}, True, lambda _: None, (ck, snaps, steps)) is None
    steps.write_text("step\n1\n2\n")  # the new run's log, then kill -9: nothing of it ran to restore_aside
    said = []
    state = resume.usable_state(ck, old, True, said.append, (ck, snaps, steps))
    assert state["step"] == 10 and said == [f"the checkpoint set aside in {tmp_path}/checkpoint.stale (step 10) was "
                                             "made from these inputs: resuming it"]
    eng = FileEngine("")
    assert checkpoint.load(eng, ck)["step"] == 10 and eng.payload == "old" and snaps.is_dir()
    assert steps.read_text() == "step\n1\n10\n" and (tmp_path / "steps.csv.stale").read_text() == "step\n1\n2\n"
    assert not (tmp_path / "checkpoint.stale").exists()


def test_a_stale_checkpoint_and_a_matching_one_aside_trade_places(tmp_path):
    ck = tmp_path / "checkpoint"
    a, b = {"training settings": "a"}, {"training settings": "b"}
    checkpoint.save(FileEngine("a"), ck, {"step": 4, "params_hash": settings_hash(a), "identity": a})
    resume.usable_state(ck, b, True, lambda _: None, (ck,))
    checkpoint.save(FileEngine("b"), ck, {"step": 2, "params_hash": settings_hash(b), "identity": b})
    assert resume.usable_state(ck, a, True, lambda _: None, (ck,))["step"] == 4
    assert checkpoint.read_state(tmp_path / "checkpoint.stale")["step"] == 2  # b's waits aside in turn


def damaged(tmp_path, how: str):
    ck = tmp_path / "checkpoint"
    ident = {"training settings": "a"}
    checkpoint.save(FileEngine("w"), ck, {"step": 5, "params_hash": settings_hash(ident), "identity": ident})
    (tmp_path / "steps.csv").write_text("step\n1\n5\n")
    state, rng, model = ck / checkpoint.STATE, ck / "rng_rank0.pt", ck / checkpoint.TAG / "model.pt"
    {"state missing": lambda: state.unlink(), "state empty": lambda: state.write_text(""),
     "state cut": lambda: state.write_text(state.read_text()[:10]),
     "rng cut": lambda: rng.write_bytes(rng.read_bytes()[:100]), "rng missing": lambda: rng.unlink(),
     "model empty": lambda: model.write_bytes(b""), "model cut": lambda: model.write_bytes(model.read_bytes()[:50]),
     }[how]()
    return ck, ident


@pytest.mark.parametrize("how, named", [
    ("state missing", "trainer_state.json is missing"), ("state empty", "trainer_state.json is empty"),
    ("state cut", "trainer_state.json is not valid JSON (cut short?)"),
    ("rng cut", "rng_rank0.pt cannot be read"), ("rng missing", "rng_rank0.pt is missing"),
    ("model empty", "model.pt is empty"), ("model cut", "model.pt cannot be read"),
])
def test_a_damaged_checkpoint_is_named_and_refused_and_its_step_log_kept(tmp_path, how, named):
    ck, ident = damaged(tmp_path, how)
    steps = tmp_path / "steps.csv"
    with pytest.raises(checkpoint.DamagedCheckpoint) as e:
        resume.usable_state(ck, ident, True, lambda _: None, (ck, steps), fix="the fix")
    said = str(e.value)
    assert said.startswith(f"the checkpoint {ck} is damaged: {ck}") and named in said
    assert said.endswith("the run does not start from it: the fix") and e.value.exit_status == 4
    assert steps.read_text() == "step\n1\n5\n" and ck.exists()  # nothing emptied, nothing moved
    told = []  # asked to start afresh (--fresh): set aside whole, the step log with it
    assert resume.usable_state(ck, ident, True, told.append, (ck, steps), fresh_if_damaged=True) is None
    assert named in told[0] and told[0].endswith(f"waits in {ck}.stale until the new run's first checkpoint")
    assert not ck.exists() and not steps.exists()
    assert (tmp_path / "steps.csv.stale").read_text() == "step\n1\n5\n"
