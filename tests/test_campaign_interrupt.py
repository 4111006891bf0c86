"""Ctrl-C on a real `automedbench sweep` process: sweep.json and the run folders agree, and every
run folder's trajectory is closed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from automedbench.trajectory import read_events
from automedbench_campaign.sweep import MANIFEST

CLI = [sys.executable, "-c", "from automedbench.cli import main; main()"]


def start_sweep(out: Path, data_root: Path, repeats: int, workers: int) -> subprocess.Popen:
    # the sweep's temporary folders beside its out: a worker the stop kills leaves its sandbox's call folder
    # (automedbench-exec-*) there, removed with the test's, not in /tmp
    scratch = out.with_name(out.name + "-tmp")
    scratch.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "AUTOMEDBENCH_DATA": str(data_root), "TMPDIR": str(scratch)}
    return subprocess.Popen([*CLI, "sweep", "--agents", "reference", "--tasks", "segmentation/demo", "--repeats",
                             str(repeats), "--workers", str(workers), "--out", str(out), "--data-root",
                             str(data_root)], env=env, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def wait_for_turns(out: Path, proc: subprocess.Popen, runs: int, timeout: float = 120) -> None:
    """Until `runs` run folders have a trajectory with at least two tool events (mid-agent-phase)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        busy = [p for p in out.glob("reference.*/trajectory.jsonl")
                if sum('"type": "tool"' in line for line in p.read_text().splitlines()) >= 2]
        if len(busy) >= runs:
            return
        assert proc.poll() is None, proc.communicate()[0]
        time.sleep(0.2)
    raise AssertionError("the sweep never got going")


def check_agreement(out: Path) -> dict[str, str]:
    runs = json.loads((out / MANIFEST).read_text())["runs"]
    on_disk = {}
    for run_id, record in runs.items():
        folder = out / run_id
        if not folder.exists():
            assert (record["state"], record["attempts"]) == ("pending", 0), run_id
            continue
        result = json.loads((folder / "result.json").read_text())
        on_disk[run_id] = result["state"]
        assert record["state"] == result["state"] and record["attempts"] >= 1, (run_id, record, result["state"])
        events = read_events(folder / "trajectory.jsonl")
        assert events[-1]["type"] == "end", run_id
        if result["state"] == "cancelled":
            # interrupted in the agent phase: the trajectory closes as cancelled; interrupted after the agent
            # submitted (freeze, evaluation, judge): the trajectory keeps the agent phase's own end
            assert result["end_reason"] == "cancelled" and events[-1]["reason"] in ("cancelled", "submitted")
    return on_disk


def refused_beside(out: Path, data_root: Path, first: subprocess.Popen) -> None:
    """A second sweep on the same out while `first` writes there: refused in one line naming its pid."""
    second = subprocess.run([*CLI, "sweep", "--agents", "reference", "--tasks", "segmentation/demo", "--out",
                             str(out), "--data-root", str(data_root)], capture_output=True, text=True,
                            timeout=120, env={**os.environ, "AUTOMEDBENCH_DATA": str(data_root)})
    assert second.returncode == 2
    lines = (second.stdout + second.stderr).strip().splitlines()
    assert len(lines) == 1 and "another sweep is writing to" in lines[0] and f"pid {first.pid}" in lines[0]


# One sweep per case, checked many ways: with the whole group interrupted, a second sweep on the same out is
# refused while the first runs (it touches nothing: two run folders after the interrupt, the third never made),
# and the lock goes with the first one's process (the rerun runs and resumes).
@pytest.mark.parametrize("whole_group", [True, False], ids=["ctrl-c-terminal", "sigint-to-the-sweep-only"])
def test_interrupted_sweep_manifest_and_folders_agree(tmp_path, data_root, staged, whole_group):
    out = tmp_path / "sweep"
    proc = start_sweep(out, data_root, repeats=3, workers=2)
    try:
        wait_for_turns(out, proc, runs=2)
        if whole_group:
            refused_beside(out, data_root, proc)
            os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        else:
            os.kill(proc.pid, signal.SIGINT)  # the workers never see it: the sweep must stop them itself
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, output
    assert "interrupted: rerun the same command to resume" in output
    states = check_agreement(out)
    # the two in flight end cancelled, or scored when they finish within the sweep's grace period (a
    # fast machine); the third never started. Either way the manifest and the folders agree (above).
    assert len(states) == 2 and set(states.values()) <= {"cancelled", "scored"}, states
    if not whole_group:
        return
    # rerun resumes: everything ends scored, the cancelled attempts kept aside, the finished ones not run again
    finished = sum(state == "scored" for state in states.values())
    proc = start_sweep(out, data_root, repeats=3, workers=2)
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, output
    assert f"3 run(s): {finished} already finished" in output, output
    assert set(check_agreement(out).values()) == {"scored"} and len(check_agreement(out)) == 3
