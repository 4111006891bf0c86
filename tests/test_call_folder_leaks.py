"""No sandbox call folder (`automedbench-exec-*` in the temp dir) outlives what opened it: a day of test runs
left ~500 in /tmp. tests/exec_folders.py tracks every folder a test process makes and tests/conftest.py fails the
session on any left; these check that check, and the runner's own path between opening a session and its turns."""

from __future__ import annotations

import exec_folders
from automedbench import runner
from automedbench.runner import Run, RunOptions
from automedbench.sandbox import SandboxSpec
from automedbench.sandboxes.local import LocalSandbox


def test_an_unclosed_session_is_named_with_its_test_and_a_closed_one_is_not(tmp_path):
    for sub in ("ws", "public"):
        (tmp_path / sub).mkdir()
    closed = LocalSandbox("none").open(SandboxSpec(tmp_path / "ws", tmp_path / "public"))
    closed.close()
    left = LocalSandbox("none").open(SandboxSpec(tmp_path / "ws", tmp_path / "public"))
    try:
        found = exec_folders.leaked()
        assert closed.exec_dir.path not in found and not closed.exec_dir.path.exists()
        assert found[left.exec_dir.path].endswith("::test_an_unclosed_session_is_named_with_its_test_and_a_closed_"
                                                  "one_is_not")
    finally:
        left.close()
    assert left.exec_dir.path not in exec_folders.leaked()


def test_a_run_failing_between_opening_its_sandbox_and_its_first_turn_closes_the_sandbox(reg, staged, data_root,
                                                                                           tmp_path, monkeypatch):
    """Rendering the brief (or arming the tripwire) failed after the session was open: the run ended as an
    infrastructure failure and the session, with its call folder, stayed open until the process ended."""
    before = set(exec_folders.MADE)

    def broken(*args, **kwargs):
        raise RuntimeError("brief template exploded")

    monkeypatch.setattr(runner, "render_brief", broken)
    run = Run(RunOptions("segmentation/demo", "lite", "reference", out=tmp_path, data_root=data_root), reg)
    result = run.execute()
    assert result.state == "infrastructure_failure" and "brief template exploded" in result.error
    made = set(exec_folders.MADE) - before
    assert made and not any(path.exists() for path in made)
