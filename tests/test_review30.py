"""Review 30 of redteam37, polish5 and ux29: what an agent could turn into a retryable failure, and what the merged
changes left unsound. Each test failed before its fix."""

from __future__ import annotations

import os

import pytest
from review_steps import exec_events, need_bwrap, register_steps, run_steps


@pytest.fixture(scope="module")
def reg_steps(reg):
    return register_steps(reg)


def test_an_agent_that_locks_its_own_workspace_is_scored_not_an_infrastructure_failure(reg_steps, data_root,
                                                                                         tmp_path):
    """A harness run as root (bubblewrap drops every capability): the agent's `chmod 000 /workspace` made each later
    call end with bwrap's "Can't chdir to /workspace", and the harmless probe with the same mounts failed the same
    way, so the run ended infrastructure_failure (retryable) by the agent's own doing. The workspace's mode is the
    harness's again before each call: the run is scored and the later call runs."""
    need_bwrap()
    if os.geteuid() != 0:
        pytest.skip("a non-root harness cannot make its call folders in a 000 workspace: the agent's error already")
    steps = [["bash", "chmod 000 /workspace && stat -c %a /workspace"], ["bash", "echo still-here"]]
    result, run_dir = run_steps(reg_steps, tmp_path / "runs", data_root, steps, sandbox="local")
    assert result.state == "scored", (result.state, result.error)
    calls = exec_events(run_dir)
    assert any("still-here" in str(event.get("stdout", "")) for event in calls), calls
