"""What a failed stage tells the user about the outputs DVC removed before running it."""

from helpers import REPO

from rlvr.cli import restore_hint


def test_the_hint_names_how_each_removed_output_comes_back(monkeypatch, capsys):
    """A train stage refusing its params: DVC removed its model (cached: dvc checkout) and
    its summary.json (cache: false, so not in DVC's cache: git has it); its persistent
    steps.csv was never removed, so it is not named."""
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("DVC_STAGE", "train@grpo-0")
    restore_hint()
    said = capsys.readouterr().err
    assert "`dvc checkout --force train@grpo-0` restores models/grpo/seed0 from the cache" in said
    assert ("reports/train/grpo/seed0/summary.json (cache: false) is not in the cache: `git checkout -- "
            "reports/train/grpo/seed0/summary.json` brings back the committed version") in said
    assert "steps.csv" not in said


def test_without_dvc_the_hint_stays_general(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DVC_STAGE", "check_params")
    monkeypatch.delenv("DVC_ROOT", raising=False)
    restore_hint()
    assert "`dvc checkout --force check_params` restores them from the cache" in capsys.readouterr().err
