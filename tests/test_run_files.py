"""The step log never holds a step twice."""

import pytest

from rlvr.run_files import StepLog


def test_the_step_log_refuses_a_step_it_holds(tmp_path):
    log = StepLog(tmp_path / "steps.csv")
    log.append({"step": 1, "loss": 0.5})
    log.append({"step": 2, "loss": 0.4})
    with pytest.raises(RuntimeError, match="already holds step 2: step 2 would repeat"):
        log.append({"step": 2, "loss": 0.3})
    log.truncate(1)  # a resume from step 1's checkpoint
    log.append({"step": 2, "loss": 0.3})
    assert [r["step"] for r in log.history()] == [1, 2] and log.history()[1]["loss"] == 0.3


def _snapshot(snaps, step):
    snaps.dir(step).mkdir(parents=True)
    (snaps.dir(step) / "model.safetensors").write_text(str(step))
    snaps.mark(step)


def test_the_papers_protocol_keeps_a_snapshot_every_n_steps_beside_the_best(tmp_path):
    """snapshot_every 2 over 7 steps: steps 2, 4, 6 are kept through every
    prune, the best on validation (step 3) too, the others deleted; the final
    model's listing holds them by step, each marked, then the final model."""
    import json

    from rlvr.run_files import SNAPSHOTS, Snapshots

    snaps = Snapshots(tmp_path / "snapshots", "h", every=2)
    assert [s for s in range(1, 8) if snaps.kept(s)] == [2, 4, 6]
    assert not Snapshots(tmp_path / "x", "h").kept(4)  # 0: off
    for step in (1, 2, 3, 4, 5, 6):
        _snapshot(snaps, step)
    snaps.prune(3)
    assert sorted(d.name for d in snaps.root.iterdir()) == ["step_000002", "step_000003", "step_000004",
                                                            "step_000006"]
    final = tmp_path / "final"
    final.mkdir()
    snaps.link_into(final, {"step": 3, "score": 0.5}, 7, {3: 0.5, 6: 0.25})
    listed = json.loads((final / SNAPSHOTS).read_text())
    assert [(e["step"], e["best"], e["protocol"], e["validation"]) for e in listed] == [
        (2, False, True, None), (3, True, False, 0.5), (4, False, True, None), (6, False, True, 0.25),
        (7, False, True, None)]
    assert (final / "snapshots/step_000004/model.safetensors").read_text() == "4"


def test_without_the_protocol_only_the_best_and_the_final_model_are_listed(tmp_path):
    import json

    from rlvr.run_files import SNAPSHOTS, Snapshots

    snaps = Snapshots(tmp_path / "snapshots", "h")
    for step in (1, 2):
        _snapshot(snaps, step)
    snaps.prune(2)
    assert [d.name for d in snaps.root.iterdir()] == ["step_000002"]
    final = tmp_path / "final"
    final.mkdir()
    snaps.link_into(final, {"step": 2, "score": 0.5}, 3, {2: 0.5, 3: 0.25})
    assert [(e["step"], e["best"], e["protocol"]) for e in json.loads((final / SNAPSHOTS).read_text())] == [
        (2, True, False), (3, False, False)]
