"""Test helpers for plugin authors: run a task end to end, and check a track the way `validate-task` does.

A plugin's `tests/conftest.py` can say `pytest_plugins = ["automedbench.testing"]` to get the
`amb_registry`, `amb_data_root` and `amb_run` fixtures; the plain functions work without pytest.
`check_sandbox` is the conformance suite a sandbox backend runs against itself (`register_agent` and
`StepsAgent` put test agents into a registry).
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .agent import Agent
from .records import AgentTurn, Result, ToolCall
from .sandbox_checks import CHECKS as SANDBOX_CHECKS
from .sandbox_checks import CheckResult, check_sandbox

# What a plugin's tests use of the engine, offered here so a track's tests, like its code, import only
# automedbench.api and automedbench.testing (tests/test_layering.py holds that). Loaded on first use: a test
# module importing automedbench.testing does not load the runner.
_ENGINE = {
    "Run": "runner", "RunOptions": "runner", "RulesJudge": "judges.rules", "render_brief": "brief",
    "evaluate_folder": "evaluate_cmd", "validate": "validate", "cli_main": "cli:main",
    "judged_stages": "scoring", "evaluate_in_process": "evaluator:evaluate", "freeze": "freeze",
    "grade_evaluation": "grading", "render_grade_request": "grading:render", "GRADES_FILE": "grading",
    "resolve_rubric": "rubric:resolve", "check_rubric": "rubric:check", "describe_conditions": "rubric",
    "asked_items": "judge", "verdict_schema": "judge", "registry": "plugins", "Registry": "plugins",
    "find_reference_leaks": "leaksearch",
}


def __getattr__(name: str) -> Any:
    where = _ENGINE.get(name)
    if where is None:
        raise AttributeError(f"module automedbench.testing has no attribute {name!r}")
    import importlib

    module, _, attr = where.partition(":")
    return getattr(importlib.import_module(f"automedbench.{module}"), attr or name)


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


__all__ = [
    *_ENGINE,
    "SANDBOX_CHECKS",
    "CheckResult",
    "StepsAgent",
    "check_sandbox",
    "check_track",
    "docker_unavailable",
    "ensure_staged",
    "fresh_registry",
    "stage_from_folder",
    "item_values",
    "needs",
    "needs_docker",
    "pytest_configure",
    "reference_leaks",
    "register_agent",
    "register_toy_track",
    "run_task",
    "full_check",
    "sampled",
    "stage_scores",
    "stage_task",
]


def pytest_configure(config: Any) -> None:
    """Each checkout's tests stage into its own `.data` folder, not the per-user default every checkout
    on the host would share (an explicit AUTOMEDBENCH_DATA wins), and keep the harness state (key, signed
    caches, the disk-reservation ledger) in its own `.state` folder (an explicit AUTOMEDBENCH_STATE wins), so
    test runs of other checkouts on the same disk never share caches or refuse each other's runs.

    Under pytest-xdist each worker takes a subfolder of both (`.data/gw0`, ...): staging writes in place
    and a run without isolation rotates the harness key, so two workers must not share them."""
    os.environ.setdefault("AUTOMEDBENCH_DATA", str(Path(config.rootpath) / ".data"))
    os.environ.setdefault("AUTOMEDBENCH_STATE", str(Path(config.rootpath) / ".state"))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker and os.environ.get(_SPLIT_FOR) != worker:  # once per worker (this hook may be registered twice)
        for var in ("AUTOMEDBENCH_DATA", "AUTOMEDBENCH_STATE"):
            os.environ[var] = str(Path(os.environ[var]) / worker)
        os.environ[_SPLIT_FOR] = worker


_SPLIT_FOR = "AUTOMEDBENCH_XDIST_FOLDERS_FOR"


# scripts/test.sh starts the docker engine and builds the images in the background while the fast tests
# run; scripts/docker-up.sh writes "ready" or "unavailable: why" to this file when it is done.
DOCKER_STATUS = "AUTOMEDBENCH_DOCKER_STATUS"
DOCKER_WAIT = "AUTOMEDBENCH_DOCKER_WAIT"  # seconds a docker test waits for that file [default 1800]
REQUIRE_DOCKER = "AUTOMEDBENCH_REQUIRE_DOCKER"  # "1": a docker test fails, not skips, where no engine is usable
_docker_answer: list[str | None] = []


def _docker_status_file(wait_s: float) -> str | None:
    """The status line docker-up.sh wrote, waiting for it up to `wait_s` seconds; None where no background
    build was started (the variable is unset)."""
    import time

    path = os.environ.get(DOCKER_STATUS)
    if not path:
        return None
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return Path(path).read_text(errors="replace").strip() or "unavailable: empty status file"
        except FileNotFoundError:
            if time.monotonic() >= deadline:
                return f"unavailable: the docker engine and images were not ready after {wait_s:.0f} s"
            time.sleep(1)


def docker_unavailable(wait_s: float | None = None) -> str | None:
    """Why the docker sandbox cannot run here (None when it can), decided when a test first asks, never at
    import. Where the engine and images are being prepared in the background ($AUTOMEDBENCH_DOCKER_STATUS),
    waits for them first (up to `wait_s`, default $AUTOMEDBENCH_DOCKER_WAIT or 1800 s). Asked once per process."""
    if _docker_answer:
        return _docker_answer[0]
    if wait_s is None:
        wait_s = float(os.environ.get(DOCKER_WAIT) or 1800)
    status = _docker_status_file(wait_s)
    why: str | None
    if status is not None and not status.startswith("ready"):
        why = status.removeprefix("unavailable: ")
    else:
        from .errors import UserError
        from .plugins import registry

        try:  # the docker sandbox is a built-in distribution: found through the registry, never imported
            ok, reason = registry().create("sandbox", "docker").available()
            why = None if ok else reason
        except (UserError, ImportError) as exc:
            why = str(exc)
            if why and status is not None:
                why = f"docker-up.sh reported the engine ready, yet: {why}"
    _docker_answer.append(why)
    return why


def register_toy_track() -> None:
    """Add the pure-Python toy track (`toy/vowels`) to the process-wide registry; idempotent."""
    from .plugins import registry
    from .toy import plugin

    registry().add_plugin(plugin, name="automedbench-toy", distribution="automedbench")


def register_agent(cls: type[Agent], registry: Any = None) -> Any:
    """Add a test agent class to a registry (default: the process-wide one) under its `name`; idempotent.

    Returns the registry, so `register_agent(Cls, reg).agent(...)` reads in one line."""
    import types

    from .hookspecs import hookimpl
    from .plugins import registry as default_registry

    reg = registry if registry is not None else default_registry()
    module = types.ModuleType(f"test_agent_{cls.name}")

    @hookimpl
    def automedbench_register_agents(register: Any) -> None:
        register(cls.name, cls, "test agent")

    module.automedbench_register_agents = automedbench_register_agents  # type: ignore[attr-defined]
    reg.add_plugin(module, name=module.__name__)
    return reg


class StepsAgent(Agent):
    """Runs the given (language, code) steps, one `execute_code` call per turn, then submits.

    Language "raw" passes the code as the call's raw arguments string (to test argument parsing)."""

    name = "review-steps"

    def __init__(self, steps: list[list[str]] | None = None, submit: bool = True) -> None:
        self.steps = list(steps or [])
        self.submit = submit
        self.turn = 0

    def next_turn(self, messages: Any) -> AgentTurn:
        self.turn += 1
        if self.turn <= len(self.steps):
            language, code = self.steps[self.turn - 1]
            args = code if language == "raw" else json.dumps({"language": language, "code": code})
            return AgentTurn(f"step {self.turn}", [ToolCall(f"c{self.turn}", "execute_code", args)])
        if self.submit and self.turn == len(self.steps) + 1:
            return AgentTurn("submit", [ToolCall("s", "submit_results", "{}")])
        return AgentTurn("done", [])


def stage_task(task_id: str, data_root: Path) -> Any:
    """Stage (or reuse) a task under `data_root`; returns its `StagedData`."""
    from . import staging
    from .plugins import registry

    track, task = registry().task(task_id)
    return staging.ensure(track, task, data_root)


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


def check_track(task_id: str, data_root: Path) -> tuple[bool, str]:
    """What `automedbench validate-task` checks (task file, staging, briefs per tier, rubric, baselines).

    Returns (passed, the report it printed) so a plugin's own tests can assert on both."""
    from rich.console import Console

    from .plugins import registry
    from .validate import validate

    buffer = io.StringIO()
    console = Console(file=buffer, width=200, no_color=True, highlight=False)
    ok = validate(registry(), task_id, data_root, console)
    return ok, buffer.getvalue()


def reference_leaks(task_id: str, data_root: Path, *, roots: list[Path] | None = None,
                    max_files: int = 400_000) -> list[Any]:
    """The demo conformance check every track's demo must pass (an empty list): stage the task, then search
    every file a sandbox can read (the public folder, the sandbox Python's site-packages and package
    data, the task's read-only assets; or `roots`) for each private reference: the same bytes, the same
    long text, or an image that correlates with a reference more than the case's own public input does
    (`leaksearch`)."""
    import hashlib
    import json as _json

    from .leaksearch import TEXT_SUFFIXES, find_reference_leaks, load_image, sandbox_readable_roots

    def digest(path: Path) -> str:
        return hashlib.sha256(path.read_bytes()).hexdigest() if path.stat().st_size <= 256 << 20 else ""

    staged = stage_task(task_id, data_root)
    images, inputs, texts, files = {}, {}, {}, []
    given_inputs: dict[str, set[str]] = {}
    for path in sorted(p for p in staged.private.rglob("*") if p.is_file() and not p.is_symlink()):
        case_public = staged.public / path.relative_to(staged.private).parts[0]
        if case_public.is_dir() and case_public.name not in given_inputs:
            given_inputs[case_public.name] = {digest(q) for q in case_public.rglob("*")
                                              if q.is_file() and not q.is_symlink()}
        if digest(path) in given_inputs.get(case_public.name, set()):
            continue  # the harness's trusted copy of an input the agent is given (a scoring mask): no secret
        files.append(path)
        name = path.relative_to(staged.private).as_posix()
        case = path.relative_to(staged.private).parts[0]
        image = load_image(path) if path.stat().st_size <= 48 << 20 else None
        if image is not None:
            images[name] = image
            public = staged.public / case
            for candidate in sorted(public.rglob("*")) if public.is_dir() else []:
                given = load_image(candidate) if candidate.is_file() else None
                if given is not None:
                    inputs[name] = given
                    break
        elif path.suffix.lower() in TEXT_SUFFIXES and path.stat().st_size <= 1 << 20:
            text = path.read_text("utf-8", "replace")
            try:
                values = _json.loads(text)
            except ValueError:
                texts[name] = text
                continue
            stack = [values]
            while stack:
                item = stack.pop()
                if isinstance(item, dict):
                    stack += list(item.values())
                elif isinstance(item, list):
                    stack += item
                elif isinstance(item, str):
                    texts[f"{name}:{len(texts)}"] = item
    if roots is None:
        from .plugins import registry

        track, task = registry().task(task_id)
        assets = track.assets(task)  # mounted in the sandbox (an editable install keeps them outside sys.prefix)
        roots = sandbox_readable_roots(staged.public) + ([Path(assets).resolve()] if assets is not None else [])
    return find_reference_leaks(images, roots, private_files=files, texts=texts, inputs=inputs, max_files=max_files)


try:  # fixtures only where pytest is installed (it is a test-time dependency, not a runtime one)
    import pytest
except ImportError:  # pragma: no cover
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    def needs(*modules: str, reason: str = "") -> Any:
        """A skip marker for tests that need optional packages, decided WITHOUT importing them (a test module
        that imports torch, transformers or an SDK at collection costs seconds for every test run)."""
        from importlib.util import find_spec

        missing = [m for m in modules if find_spec(m) is None]
        return pytest.mark.skipif(bool(missing), reason=reason or f"not installed: {', '.join(missing)}")

    def needs_docker() -> None:
        """Skip the calling test (or fixture) where no docker engine with the images is usable, after waiting
        for a background build (`docker_unavailable`); fail instead with AUTOMEDBENCH_REQUIRE_DOCKER=1, or
        where docker-up.sh said the engine was ready and it is not."""
        why = docker_unavailable()
        if why is None:
            return
        if os.environ.get(REQUIRE_DOCKER) == "1" or why.startswith("docker-up.sh reported"):
            pytest.fail(f"docker sandbox required but unusable: {why}", pytrace=False)
        pytest.skip(f"docker: {why}")

    @pytest.fixture(scope="session")
    def amb_docker() -> None:
        """A test using this fixture runs only where the docker sandbox can (`needs_docker`); the test
        suite's conftest marks such tests `docker`, so a test run can schedule them after the images."""
        needs_docker()

    ALL_LAYOUT_CHECKS = "AUTOMEDBENCH_ALL_LAYOUT_CHECKS"
    # A slow check that the default test run leaves to a release check (AUTOMEDBENCH_ALL_LAYOUT_CHECKS=1).
    full_check = pytest.mark.skipif(os.environ.get(ALL_LAYOUT_CHECKS) != "1",
                                    reason=f"a sample runs by default; {ALL_LAYOUT_CHECKS}=1 runs every case")

    def sampled(values: list[Any], keep: int = 1) -> list[Any]:
        """Parameters for a slow per-task check: the first `keep` always run, the rest only with
        AUTOMEDBENCH_ALL_LAYOUT_CHECKS=1 (full-size download copies of every task, fresh-venv installs of
        every track, cost most of an hour on two cores; the default run checks a sample, a release all)."""
        return [v if i < keep else pytest.param(*(v if isinstance(v, tuple) else (v,)), marks=full_check)
                for i, v in enumerate(values)]

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
