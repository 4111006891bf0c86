"""Shared fixtures: one staged demo data root per session, runs in per-test folders."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import exec_folders
import file_order
import pytest
from automedbench.plugins import registry

# the test kit as the tracks' tests load it: its pytest_configure (the checkout's own data folder), amb_docker, and
# amb_run registered once, so its session cache is the one the tracks' tests fill (a run is not made twice)
pytest_plugins = ["automedbench.testing"]

DEMO = "segmentation/demo"
exec_folders.track()  # every sandbox call folder this process makes, checked at the session's end (below)
# A test run started as a background job of a non-interactive shell (`bash scripts/test.sh &`) inherits SIGINT
# ignored, which Python then keeps, and so does every sweep the interrupt tests start: their Ctrl-C would be lost
# and they would fail for the way the suite was started. The suite's processes take Ctrl-C as a terminal gives it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    """Before the other implementations (so before `-m` deselects): a test that needs the docker engine (it uses
    the `amb_docker` fixture) is marked `docker`, so that scripts/test.sh runs it in the slow tier, after the
    images it builds in the background. After them: the selected tests file by file, longest file first
    (tests/file_order.py: the seconds of tests/file_times.json); a file's tests keep their order."""
    for item in items:
        if "amb_docker" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.docker)
    outcome = yield
    tiers: dict[str, set[str]] = {}
    for item in items:
        tiers.setdefault(file_order.file_of(item.nodeid), set()).add(file_order.tier_of(item.keywords))
    groups = file_order.groups_for(file_order.session_tier(config.getoption("markexpr")))
    rank = {name: k for k, name in enumerate(file_order.order(tiers, file_order.load(), groups))}
    items.sort(key=lambda item: rank[file_order.file_of(item.nodeid)])
    return outcome


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` (scripts/test.sh) hands out whole files, and each group of tests/file_order.py (files
    paying the same first-in-process cost, or sharing a cached run; the slow tier's groups where `-m` selects slow
    tests) whole to one worker: one cost per tier."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    tier = file_order.session_tier(config.getvalue("markexpr"))

    class FilesAndGroups(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return file_order.scope_of(nodeid, tier)

    return FilesAndGroups(config, log)


_SPENT: dict[str, dict[str, float]] = {}


def pytest_runtest_logreport(report):
    """With AUTOMEDBENCH_FILE_TIMES=update, each test's setup, call and teardown seconds, summed per file and
    tier (in the process the reports reach: the xdist controller, or pytest alone)..."""
    if os.environ.get(file_order.FILE_TIMES_ENV) == "update":
        spent = _SPENT.setdefault(file_order.file_of(report.nodeid), {})
        tier = file_order.tier_of(report.keywords)
        spent[tier] = spent.get(tier, 0.0) + report.duration


def pytest_sessionstart(session):
    """Every test session starts with no graded reply cached. The grading step's cache lives in the (worker's) state
    folder, which outlives the session: tests that count the requests reaching a scripted grader found the replies
    of the previous test run in this checkout there, and none reached it (a second run of the suite failed)."""
    from automedbench_models.grading import default_cache_path

    default_cache_path().unlink(missing_ok=True)


def pytest_sessionfinish(session):
    """... go into tests/file_times.json at the end: the files this session ran, the tiers it ran them in."""
    if _SPENT and not hasattr(session.config, "workerinput"):
        file_order.merge(_SPENT)


@pytest.fixture(scope="session", autouse=True)
def no_call_folder_left():
    """At the end of the (worker's) session, no sandbox call folder a test made is left in the temp dir: each
    is a sandbox session never closed (tests/exec_folders.py). Those left are removed and named, with their tests."""
    yield
    left = exec_folders.leaked(remove=True)
    assert not left, "sandbox sessions never closed left call folders: " + "; ".join(
        f"{path.name} by {test}" for path, test in sorted(left.items(), key=lambda kv: kv[1]))


@pytest.fixture(scope="session")
def reg():
    return registry()


@pytest.fixture(scope="session")
def data_root(amb_data_root) -> Path:
    """The test kit's data root (`amb_data_root`): one per worker session for these tests and the tracks' tests, so a
    worker stages each task once, not once for each fixture."""
    return amb_data_root


@pytest.fixture(scope="session")
def staged(reg, data_root):
    from automedbench import staging

    track, task = reg.task(DEMO)
    return staging.ensure(track, task, data_root)


@pytest.fixture(scope="session")
def run_agent(amb_run, staged):
    """A run on the segmentation demo, once per session per arguments: the test kit's `amb_run` cache, which the
    tracks' tests and the run page test fill too, so a worker never makes the same run twice."""
    return lambda agent, tier="lite", **kw: amb_run(DEMO, agent, tier, **kw)


@pytest.fixture()
def evaluators_asked(monkeypatch) -> list[str]:
    """The evaluator backends the test's evaluations took from the registry, in order: which of warm and cold
    scored them, without timing or process counting."""
    from automedbench.plugins import Registry

    asked: list[str] = []
    create = Registry.create

    def spy(self, kind, name, **options):
        if kind == "evaluator":
            asked.append(name)
        return create(self, kind, name, **options)

    monkeypatch.setattr(Registry, "create", spy)
    return asked
