"""Shared fixtures: one staged demo data root per session, runs in per-test folders."""

from __future__ import annotations

from pathlib import Path

import pytest
from automedbench.plugins import registry
from automedbench.runner import Run, RunOptions

DEMO = "segmentation/demo"


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
def run_agent(reg, data_root, staged, tmp_path_factory):
    """Run a scripted agent once per session and cache the result by (agent, tier)."""
    cache: dict[tuple[str, str], tuple] = {}
    out = tmp_path_factory.mktemp("runs")

    def _run(agent: str, tier: str = "lite", **kw):
        key = (agent, tier, tuple(sorted(kw.items())))
        if key not in cache:
            options = RunOptions(DEMO, tier, agent, out=out, data_root=data_root, **kw)
            runner = Run(options, reg)
            cache[key] = (runner.execute(), runner.run_dir)
        return cache[key]

    return _run
