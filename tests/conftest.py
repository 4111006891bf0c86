"""Shared fixtures: one staged demo data root per session, runs in per-test folders."""

from __future__ import annotations

from pathlib import Path

import pytest
from automedbench.plugins import registry
from automedbench.runner import Run, RunOptions
from automedbench.testing import amb_docker, pytest_configure  # noqa: F401 - the checkout's own data folder

DEMO = "segmentation/demo"


# Files whose few tests take minutes (measured: the tiers' --durations=0), queued first: scripts/test.sh runs
# pytest-xdist with --dist loadfile --no-loadscope-reorder, which hands out whole files in collection order (its
# default queues them by test count, so a one-test file of two minutes, the Ray cluster, started last and ran
# alone). Order only: a file missing here, or gone, changes nothing else. The docker files stay in place (their
# tests wait for the image build, which runs while the fast tier does).
LONG_FILES_FIRST = (
    "tests/test_campaign_ray_cluster.py", "tests/test_installed_agents_runs.py", "tests/test_redteam_runs_plain.py",
    "tests/test_install_tracks.py", "tests/test_inspect_bridge.py", "tests/test_inspect_sandbox.py",
    "tests/test_warm_evaluator.py", "tests/test_campaign_interrupt.py", "tests/test_scripted_runs.py",
    "tests/test_runpage_demos.py",
    "plugins/synthesis/tests/test_synthesis_runs.py", "plugins/classification/tests/test_classification_runs.py",
    "plugins/enhancement/tests/test_enhancement_runs.py",
    "plugins/enhancement/tests/test_enhancement_reference_reach.py",
)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """A test that needs the docker engine (it uses the `amb_docker` fixture) is marked `docker`, so that
    scripts/test.sh runs it in the slow tier, after the images it builds in the background. The files of
    LONG_FILES_FIRST go to the front, in that order (the rest keep theirs)."""
    for item in items:
        if "amb_docker" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.docker)
    rank = {name: k for k, name in enumerate(LONG_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


@pytest.fixture(scope="session")
def reg():
    return registry()


@pytest.fixture(scope="session")
def data_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("data")


@pytest.fixture(scope="session")
def staged(reg, data_root):
    from automedbench import staging

    track, task = reg.task(DEMO)
    return staging.ensure(track, task, data_root)


@pytest.fixture(scope="session")
def run_task(reg, data_root, tmp_path_factory):
    """Run an agent on a task once per session; results cached by (task, agent, tier, options)."""
    cache: dict[tuple, tuple] = {}
    out = tmp_path_factory.mktemp("runs")

    def _run(task: str, agent: str, tier: str = "lite", **kw):
        key = (task, agent, tier, tuple(sorted(kw.items())))
        if key not in cache:
            runner = Run(RunOptions(task, tier, agent, out=out, data_root=data_root, **kw), reg)
            cache[key] = (runner.execute(), runner.run_dir)
        return cache[key]

    return _run


@pytest.fixture(scope="session")
def run_agent(run_task, staged):
    """`run_task` on the segmentation demo."""
    return lambda agent, tier="lite", **kw: run_task(DEMO, agent, tier, **kw)
