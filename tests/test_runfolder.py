"""RunFolder: the names of a run folder and its loaders (no symlink followed, sizes capped, clear errors)."""

from __future__ import annotations

import json

import pytest
from automedbench import runfolder
from automedbench.errors import UserError
from automedbench.runfolder import RunFolder


def test_locate_accepts_a_folder_its_result_or_a_run_id(tmp_path):
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "result.json").write_text("{}")
    assert RunFolder.locate(run).path == run
    assert RunFolder.locate(run / "result.json").path == run
    assert RunFolder.locate("r1", tmp_path / "runs").path == run
    with pytest.raises(UserError, match="holds 1 run"):
        RunFolder.locate(tmp_path / "runs")
    with pytest.raises(UserError, match="no such file"):
        RunFolder.locate("r2", tmp_path / "runs")


def test_reads_never_follow_a_symlink_in_the_folder(tmp_path):
    secret = tmp_path / "secret.md"
    secret.write_text("HOST SECRET")
    folder = RunFolder(tmp_path / "run")
    folder.artefacts.mkdir(parents=True)
    (folder.artefacts / "plan.md").symlink_to(secret)
    assert folder.plan_md() is None
    (folder.artefacts / "plan.md").unlink()
    (folder.artefacts / "plan.md").write_text("# plan")
    assert folder.plan_md() == "# plan"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "plan.png").write_bytes(b"\x89PNG")
    folder.artefacts.rename(tmp_path / "old")
    folder.artefacts.symlink_to(elsewhere)  # a symlinked parent folder is refused too
    assert folder.plan_png() is None


def test_result_bytes_are_capped(tmp_path, monkeypatch):
    folder = RunFolder(tmp_path)
    folder.result.write_text(json.dumps({"x": "y" * 100}))
    assert folder.result_bytes() == folder.result.read_bytes()
    monkeypatch.setattr(runfolder, "MAX_RESULT_BYTES", 50)
    assert folder.result_bytes() is None


def test_pilot_checks_absent_unreadable_and_filtered(tmp_path):
    folder = RunFolder(tmp_path)
    assert folder.pilot_checks() is None  # a run from before pilot checks
    folder.checks.write_text("{not json")
    assert folder.pilot_checks() == []  # unreadable: no pilot is verified
    folder.checks.write_text(json.dumps([{"turn": 1, "valid": True}, "junk", 3]))
    assert folder.pilot_checks() == [{"turn": 1, "valid": True}]


def test_torn_trajectory_is_refused_with_its_line(tmp_path):
    folder = RunFolder(tmp_path)
    folder.trajectory.write_text('{"type": "start"}\n{"type": "assistant", "tu\n')
    assert [e["type"] for e in folder.events()] == ["start"]
    with pytest.raises(UserError, match="line 2"):
        folder.check_trajectory()


def test_archived_verdict_names(tmp_path):
    folder = RunFolder(tmp_path)
    assert folder.archived_judge("rules", "20260101-000000").name == "judge.rules.20260101-000000.json"
    assert folder.archived_judge("rules", "20260101-000000", 2).name == "judge.rules.20260101-000000-2.json"
