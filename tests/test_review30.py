"""Review 30 of redteam37, polish5 and ux29: what an agent could turn into a retryable failure, and what the merged
changes left unsound. Each test failed before its fix."""

from __future__ import annotations

import os
import sys

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


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_sweep_refuses_a_tokenless_ray_instance_it_starts_by_the_address_local(tmp_path, monkeypatch, dry_run):
    """`--ray-address local` is Ray's "start a new local instance" (ray.init's address doc), as no address is. Under
    RAY_AUTH_MODE=disabled the sweep refused no address but took `local` for a cluster: it started the tokenless
    instance any local-plain agent could join, and only warned ("the cluster at local accepted this driver")."""
    from automedbench.testing import run_cli

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    out = tmp_path / "sweep"
    done = run_cli("sweep", "--agents", "reference", "--tasks", "toy/vowels", "--executor", "ray",
                   "--ray-address", "local", "--out", str(out), *(["--dry-run"] if dry_run else []))
    assert done.exit_code == 2, done.output
    assert "RAY_AUTH_MODE=disabled starts the local instance without token authentication" in done.output, \
        done.output
    assert not (out / "sweep.json").exists() and not list(out.glob("*/result.json"))


def test_the_ray_executor_refuses_a_tokenless_instance_it_starts_by_the_address_local(tmp_path, monkeypatch):
    """The executor's own refusal (a sweep built without `validate`, as Sweep.run with an executor given): the
    address `local` started the tokenless instance and said "the cluster at local accepted this driver"."""
    from automedbench.errors import UserError
    from automedbench_campaign.executors import RayExecutor
    from test_campaign_ray_edges import FakeRay  # the stand-in `ray` module: nothing of Ray starts

    ray = FakeRay()
    monkeypatch.setitem(sys.modules, "ray", ray)
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    with pytest.raises(UserError, match="--ray-allow-no-auth"):
        RayExecutor(address="local", log_path=tmp_path / "ray.log")
    assert not ray.inited
