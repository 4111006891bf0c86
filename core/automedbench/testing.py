"""Test helpers for plugin authors: run a task end to end, and check a track the way `validate-task` does.

A plugin's `tests/conftest.py` can say `pytest_plugins = ["automedbench.testing"]` to get the
`amb_registry`, `amb_data_root`, `amb_run` and `amb_docker` fixtures; the plain functions work without pytest.
This module is the face tracks' tests import (with automedbench.api, nothing else of the core): running
and staging are here; the test kit's helpers (`check_sandbox`, the conformance suite a sandbox backend runs
against itself; `StepsAgent`, `register_agent`, `reference_leaks`, `check_track`, the toy track, ...) are
forwarded from the automedbench-testkit distribution, installed by `pip install 'automedbench[test]'`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .records import Result

# What a plugin's tests use of the engine, offered here so a track's tests, like its code, import only
# automedbench.api and automedbench.testing (tests/test_layering.py holds that). Loaded on first use: a test
# module importing automedbench.testing does not load the runner.
_ENGINE = {
    "Run": "runner", "RunOptions": "runner", "RulesJudge": "judges.rules", "render_brief": "brief",
    "evaluate_folder": "evaluate_cmd", "cli_main": "cli:main",
    "judged_stages": "scoring", "evaluate_in_process": "evaluator:evaluate", "freeze": "freeze",
    "grade_evaluation": "gradestep", "GRADES_FILE": "gradestep",
    "resolve_rubric": "rubric:resolve", "check_rubric": "rubric:check", "describe_conditions": "rubric",
    "asked_items": "judge", "verdict_schema": "judge", "registry": "plugins", "Registry": "plugins",
}
# The test kit's helpers (automedbench_testkit.EXPORTS holds where each lives there).
FROM_TESTKIT = frozenset({
    "SANDBOX_CHECKS", "CheckResult", "StepsAgent", "check_sandbox", "check_track", "docker_unavailable",
    "find_reference_leaks", "full_check", "load_solution_script", "needs", "needs_docker", "reference_leaks",
    "register_agent", "register_toy_track", "sampled", "validate",
})
INSTALL_TESTKIT = "pip install 'automedbench[test]'"


def __getattr__(name: str) -> Any:
    if name in FROM_TESTKIT:
        return getattr(_testkit(name), name)
    where = _ENGINE.get(name)
    if where is None:
        raise AttributeError(f"module automedbench.testing has no attribute {name!r}")
    module, _, attr = where.partition(":")
    return getattr(importlib.import_module(f"automedbench.{module}"), attr or name)


def _testkit(name: str) -> Any:
    """The test kit package; without it, one line naming the extra that installs it."""
    try:
        import automedbench_testkit
    except ModuleNotFoundError as exc:
        if exc.name != "automedbench_testkit":
            raise
        raise ImportError(f"automedbench.testing.{name} comes with automedbench-testkit, which is not "
                          f"installed: {INSTALL_TESTKIT}") from None
    return automedbench_testkit


def fresh_registry() -> Any:
    """A new registry loaded from the installed entry points; the process-wide one is left as it is."""
    from .plugins import Registry

    fresh = Registry()
    fresh.load_entry_points()
    return fresh


def stage_from_folder(track: Any, task: Any, data_root: Path, source: Path) -> Any:
    """Stage `task` from a download folder `source` into `data_root`, as `automedbench stage T --from` does."""
    from . import staging

    return staging.stage(track, task, data_root, source)


def ensure_staged(track: Any, task: Any, data_root: Path) -> Any:
    """Stage `task` from its generator (or reuse the staged copy) under `data_root`; its `StagedData`."""
    from . import staging

    return staging.ensure(track, task, data_root)


def stage_task(task_id: str, data_root: Path) -> Any:
    """Stage (or reuse) a task under `data_root`; returns its `StagedData`."""
    from .plugins import registry

    return ensure_staged(*registry().task(task_id), data_root)


def run_task(task_id: str, agent: str, *, out: Path, data_root: Path, tier: str = "lite",
             **options: Any) -> tuple[Result, Path]:
    """One run through the real runner (sandbox, freeze, isolated evaluator, judge); (result, run folder)."""
    from .plugins import registry
    from .runner import Run, RunOptions

    runner = Run(RunOptions(task_id, tier, agent, out=out, data_root=data_root, **options), registry())
    return runner.execute(), runner.run_dir


def stage_scores(result: Result) -> dict[str, float | None]:
    """Stage id -> score of a result (None where the stage could not be scored)."""
    return {s.stage: s.score for s in result.stages}


def item_values(result: Result) -> dict[str, float | None]:
    """Rubric item id -> value over every stage of a result."""
    return {i.id: i.value for s in result.stages for i in s.items}


__all__ = sorted({*_ENGINE, *FROM_TESTKIT, "ensure_staged", "fresh_registry", "item_values", "pytest_configure",
                  "run_task", "stage_from_folder", "stage_scores", "stage_task"})


def pytest_configure(config: Any) -> None:
    """Each checkout's tests stage into its own `.data` folder, not the per-user default every checkout
    on the host would share (an explicit AUTOMEDBENCH_DATA wins), and keep the harness state (key, signed
    caches, the disk-reservation ledger) in its own `.state` folder (an explicit AUTOMEDBENCH_STATE wins), so
    test runs of other checkouts on the same disk never share caches or refuse each other's runs.

    Under pytest-xdist each worker takes a subfolder of both (`.data/gw0`, ...): staging writes in place
    and a run without isolation rotates the harness key, so two workers must not share them.

    Runs that do not choose their evaluator score on the warm one where it is installed (the sweeps' path:
    same isolation and scores, tests/test_warm_evaluator.py): no interpreter start per run, ~20 % less CPU in a
    run-heavy test file (what counts on a loaded machine; about the same wall on a quiet one);
    a test of the cold path says `warm_evaluator=False` (an explicit AUTOMEDBENCH_WARM_EVALUATOR=0 turns it off)."""
    os.environ.setdefault("AUTOMEDBENCH_WARM_EVALUATOR", "1")  # options.WARM_EVALUATOR_ENV (not imported: light)
    os.environ.setdefault("AUTOMEDBENCH_DATA", str(Path(config.rootpath) / ".data"))
    os.environ.setdefault("AUTOMEDBENCH_STATE", str(Path(config.rootpath) / ".state"))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker and os.environ.get(_SPLIT_FOR) != worker:  # once per worker (this hook may be registered twice)
        for var in ("AUTOMEDBENCH_DATA", "AUTOMEDBENCH_STATE"):
            os.environ[var] = str(Path(os.environ[var]) / worker)
        os.environ[_SPLIT_FOR] = worker


_SPLIT_FOR = "AUTOMEDBENCH_XDIST_FOLDERS_FOR"

try:  # fixtures only where pytest is installed (it is a test-time dependency, not a runtime one)
    import pytest
except ImportError:  # pragma: no cover
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture(scope="session")
    def amb_docker() -> None:
        """A test using this fixture runs only where the docker sandbox can (`needs_docker`); the test
        suite's conftest marks such tests `docker`, so a test run can schedule them after the images."""
        _testkit("needs_docker").needs_docker()

    @pytest.fixture(scope="session")
    def amb_registry() -> Any:
        """The process-wide plugin registry (every installed track, agent, sandbox and judge)."""
        from .plugins import registry

        return registry()

    @pytest.fixture(scope="session")
    def amb_data_root(tmp_path_factory) -> Path:
        """One data root per test session, so each task is staged once."""
        return tmp_path_factory.mktemp("amb-data")

    @pytest.fixture(scope="session")
    def amb_run(amb_data_root, tmp_path_factory) -> Callable[..., tuple[Result, Path]]:
        """`amb_run(task, agent, tier="lite", **options)`: run once per session per arguments, cached."""
        cache: dict[tuple, tuple[Result, Path]] = {}
        out = tmp_path_factory.mktemp("amb-runs")

        def _run(task_id: str, agent: str, tier: str = "lite", **options: Any) -> tuple[Result, Path]:
            key = (task_id, agent, tier, tuple(sorted((k, repr(v)) for k, v in options.items())))
            if key not in cache:
                cache[key] = run_task(task_id, agent, out=out, data_root=amb_data_root, tier=tier, **options)
            return cache[key]

        return _run
