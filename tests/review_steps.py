"""A scripted agent for the review tests: runs given code steps through the real harness, then submits."""

from __future__ import annotations

from pathlib import Path

import pytest
from automedbench import testing
from automedbench.agent import Agent
from automedbench.records import Result
from automedbench.runner import Run, RunOptions
from automedbench.serialize import read_json
from automedbench.testing import StepsAgent

DEMO = "segmentation/demo"


Steps = StepsAgent


def register_agent(reg, cls: type[Agent]):
    """Add a test agent class to a registry under its `name` (once; later calls are no-ops)."""
    return testing.register_agent(cls, reg)


def register_steps(reg):
    """The registry with the Steps agent in it."""
    return testing.register_agent(StepsAgent, reg)


def run_steps(reg, out: Path, data_root: Path, steps, sandbox: str = "local",
              quota_mb: int = 0) -> tuple[Result, Path]:
    """One run of scripted steps, workspace kept. No quota by default: the workspace is then a plain folder on
    the data root's filesystem (a non-root harness's case), where hard links and renames across it work."""
    runner = Run(RunOptions(DEMO, "lite", Steps.name, sandbox=sandbox, out=out, data_root=data_root,
                            agent_options={"steps": steps}, keep_workspace=True, workspace_quota_mb=quota_mb), reg)
    result = runner.execute()
    assert read_json(runner.run_dir / "result.json", Result) == result
    return result, runner.run_dir


def exec_events(run_dir: Path) -> list[dict]:
    from automedbench.trajectory import read_events

    return [e for e in read_events(run_dir / "trajectory.jsonl") if e.get("name") == "execute_code"]


def need_bwrap() -> None:
    from automedbench.sandboxes.local import bwrap_path

    if bwrap_path() is None:
        pytest.skip("bubblewrap not usable")
