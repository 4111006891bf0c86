"""A sweep leaves no workspace mounted behind it, even when its stop had to kill a worker mid-run.

A worker SIGKILLed after the grace (or lost with its Ray node) cannot unmount its size-limited workspace;
the next run in the same folder would reap it, but that run may never come. The sweep reaps such mounts in
its own output folder when it ends (only those whose owner's lock is free)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from automedbench.sandboxes import quota
from test_campaign_interrupt import start_sweep, wait_for_turns


def workspace_mounts(under: Path) -> list[str]:
    """Mount points below `under` (from this process's mount table)."""
    root = str(under.resolve()) + "/"
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point.startswith(root):
            points.append(point)
    return points


@pytest.mark.skipif(quota.unsupported() is not None, reason=f"no workspace quota here: {quota.unsupported()}")
def test_workers_killed_without_grace_leave_no_mount(tmp_path, data_root, staged, monkeypatch):
    monkeypatch.setenv("AUTOMEDBENCH_CANCEL_GRACE_S", "0")  # no time to unwind: the stop kills the workers
    out = tmp_path / "sweep"
    proc = start_sweep(out, data_root, repeats=2, workers=2)
    try:
        wait_for_turns(out, proc, runs=2)
        assert len(workspace_mounts(out)) == 2  # both runs in flight have their workspace mounted
        os.kill(proc.pid, signal.SIGINT)  # the sweep alone: it stops (and here kills) its workers itself
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, output
    deadline = time.monotonic() + 5  # an unmount the kernel is still finishing
    while workspace_mounts(out) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert workspace_mounts(out) == [], output
    assert "sweep: unmounted 2 workspace(s) left mounted by runs whose process was killed" in output, output
