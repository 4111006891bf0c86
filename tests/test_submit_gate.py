"""The track-declared pre-submit gate: a refusal reaches the agent as a tool reply and the run goes on;
a gate that fails on odd agent files accepts (fails open) and notes why. Also the task file's C floor."""

from __future__ import annotations

import json

import pytest
from automedbench.errors import UserError
from automedbench.taskfile import parse_task
from automedbench.testing import register_toy_track, run_task

TOY = "toy/vowels"  # any track will do: the gate is the core's; the toy track runs in seconds


@pytest.fixture
def toy_track(reg):
    register_toy_track()
    track, _ = reg.task(TOY)
    return track


def _events(run_dir):
    return [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines()]


def test_refusing_gate_keeps_the_run_going_without_a_submission(reg, data_root, tmp_path, toy_track, monkeypatch):
    seen = []

    def gate(task, staged, outputs):
        seen.append((task.id, len(staged.case_ids), outputs.name))
        return "not yet: policy says no"

    monkeypatch.setattr(toy_track, "submit_gate", gate)
    result, run_dir = run_task(TOY, "reference", out=tmp_path, data_root=data_root)
    assert seen and seen[0][0] == TOY and seen[0][2] == "outputs"
    submits = [e for e in _events(run_dir) if e.get("name") == "submit_results"]
    assert submits[0]["refused"] is True and submits[0]["result"] == {"accepted": False,
                                                                      "reason": "not yet: policy says no"}
    # a refused submit is recorded (E5), not scored: S5 follows the outputs alone, as the paper
    assert not result.submission.submitted and "E5" in [c.code for c in result.error_codes]
    assert result.state == "scored"


def test_failing_gate_accepts_and_notes_why(reg, data_root, tmp_path, toy_track, monkeypatch):
    def gate(task, staged, outputs):
        raise OSError("odd file")

    monkeypatch.setattr(toy_track, "submit_gate", gate)
    result, run_dir = run_task(TOY, "reference", out=tmp_path, data_root=data_root)
    assert result.submission.submitted and result.end_reason == "submitted"
    notes = [e for e in _events(run_dir) if e.get("type") == "note"]
    assert notes and "submit gate error: OSError: odd file" in notes[0]["note"]


def test_task_file_rating_floor_must_sit_below_okay():
    base = {"id": "t/x", "track": "t", "title": "x", "description": "d", "modality": "m", "input_files": ["a"],
            "output_files": ["b"], "case_count": 1, "time_limit_s": 1, "max_turns": 1, "exec_timeout_s": 1,
            "network": False, "demo": True, "tiers": {"lite": {}}, "metric": "m"}
    spec = parse_task({**base, "rating": {"good": 0.9, "okay": 0.8, "floor": 0.7}}, "x.yaml")
    assert spec.rating.floor == 0.7
    assert parse_task({**base, "rating": {"good": 0.9, "okay": 0.8}}, "x.yaml").rating.floor is None
    with pytest.raises(UserError, match="floor"):
        parse_task({**base, "rating": {"good": 0.9, "okay": 0.8, "floor": 0.85}}, "x.yaml")


WRITE_SHARED = """
import os
out = os.path.join(os.environ['WORKSPACE_DIR'], 'outputs')
os.makedirs(out, exist_ok=True)
open(os.path.join(out, 'all.csv'), 'w').write('case,answer\\n')
"""


def test_submit_reply_names_a_shared_answer_file_instead_of_calling_every_case_missing(
        reg, data_root, tmp_path, toy_track, monkeypatch):
    """A track whose one file answers several cases (classification's predictions.csv): an agent that wrote only
    that file was told every case is missing and `complete: false`. Now `complete` is unknown (null), the file is
    named and the note says the evaluation reads it; without the file the reply is as before."""
    from automedbench.testing import run_steps

    monkeypatch.setattr(toy_track, "shared_outputs", lambda task: ("all.csv",))
    _, run_dir = run_steps(TOY, [("python", WRITE_SHARED)], out=tmp_path / "shared", data_root=data_root)
    reply = next(e for e in _events(run_dir) if e.get("name") == "submit_results")["result"]
    assert reply["accepted"] is True and reply["complete"] is None and reply["shared_outputs"] == ["all.csv"]
    assert reply["missing_count"] > 0 and "all.csv" in reply["note"]

    _, run_dir = run_steps(TOY, [("python", "print('nothing')")], out=tmp_path / "none", data_root=data_root)
    reply = next(e for e in _events(run_dir) if e.get("name") == "submit_results")["result"]
    assert reply["complete"] is False and "shared_outputs" not in reply and reply["missing_count"] > 0
