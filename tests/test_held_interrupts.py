"""An interrupt while a finished run writes its record waits until the record is written: the run keeps its
result.json and releases its workspace, then the interrupt goes on as before (a sweep that stops its
workers, or an operator's Ctrl-C, no longer leaves a submitted run without a record)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from automedbench.interrupt import held
from automedbench.runner import Run
from automedbench.testing import run_task


def test_a_held_interrupt_is_delivered_when_the_block_ends():
    before = signal.getsignal(signal.SIGINT)
    reached = []
    with pytest.raises(KeyboardInterrupt), held():
        os.kill(os.getpid(), signal.SIGINT)
        reached.append("after the signal")
    assert reached == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is before


def test_a_second_interrupt_acts_at_once():
    reached = []
    with pytest.raises(KeyboardInterrupt), held():
        os.kill(os.getpid(), signal.SIGINT)
        reached.append(1)
        os.kill(os.getpid(), signal.SIGINT)
        reached.append(2)
    assert reached == [1]


def test_sigterm_goes_to_the_handler_that_was_there_before():
    got = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: got.append(signum))
    try:
        with held():
            os.kill(os.getpid(), signal.SIGTERM)
            assert got == []
        assert got == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_run_interrupted_while_finishing_keeps_its_record(tmp_path, monkeypatch):
    """SIGINT arrives in the run-finished hooks (after the agent submitted): the run still writes result.json
    (scored) and releases its workspace; the interrupt is raised after that."""
    finish = Run._run_finished

    def interrupted(self, result):
        os.kill(os.getpid(), signal.SIGINT)
        return finish(self, result)

    monkeypatch.setattr(Run, "_run_finished", interrupted)
    out = tmp_path / "runs"
    with pytest.raises(KeyboardInterrupt):
        run_task("toy/vowels", "reference", out=out, data_root=tmp_path / "data")
    (run_dir,) = out.iterdir()
    result = json.loads((run_dir / "result.json").read_text())
    assert result["state"] == "scored"
    assert not (run_dir / "workspace").exists() and not (run_dir / "workspace.img").exists()
    assert str(run_dir) not in Path("/proc/self/mountinfo").read_text()
