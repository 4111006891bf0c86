"""Shared fixtures: one staged demo data root per session, runs in per-test folders."""

from __future__ import annotations

from pathlib import Path

import pytest
from automedbench.plugins import registry
from automedbench.runner import Run, RunOptions
from automedbench.testing import amb_docker, pytest_configure  # noqa: F401 - the checkout's own data folder

DEMO = "segmentation/demo"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """A test that needs the docker engine (it uses the `amb_docker` fixture) is marked `docker`, so that
    scripts/test.sh runs it in the slow tier, after the images it builds in the background."""
    for item in items:
        if "amb_docker" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.docker)


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
