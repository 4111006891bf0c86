"""Test helpers for plugin authors: what a track's tests do (run a task end to end, evaluate a folder, render a
brief, grade a trajectory with the rules judge, stage a task, check a track as `validate-task` does), as functions.

A plugin's `tests/conftest.py` can say `pytest_plugins = ["automedbench.testing"]` to get the
`amb_registry`, `amb_data_root`, `amb_run` and `amb_docker` fixtures; the plain functions work without pytest.
This module is the face tracks' tests import (with automedbench.api, nothing else of the core): its helpers are
built on `automedbench.engine` and hand back records of `automedbench.api`, so a test never holds the engine's
classes. The test kit's helpers (`check_sandbox`, the conformance suite a sandbox backend runs against itself;
`StepsAgent`, `register_agent`, `reference_leaks`, `check_track`, `check_download`, ...) are
forwarded from the automedbench-testkit distribution, installed by `pip install 'automedbench[test]'`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attrs import frozen

if TYPE_CHECKING:
    from .records import Evaluation, ItemVerdict, Result, StageScore, TaskSpec
    from .rubric import Resolved, Rubric
    from .track import StagedData, Track

# The test kit's helpers (automedbench_testkit.EXPORTS holds where each lives there).
FROM_TESTKIT = frozenset({
    "SANDBOX_CHECKS", "CheckResult", "StepsAgent", "check_download", "check_sandbox", "check_track",
    "docker_unavailable", "find_reference_leaks", "full_check", "load_solution_script", "needs", "needs_docker",
    "reference_leaks", "register_agent", "sampled", "validate", "check_stager", "stager_report", "STAGER_CHECKS",
    "assert_stager_conforms",
})
INSTALL_TESTKIT = "pip install 'automedbench[test]'"


def __getattr__(name: str) -> Any:
    if name in FROM_TESTKIT:
        return getattr(_testkit(name), name)
    raise AttributeError(f"module automedbench.testing has no attribute {name!r}")


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


# ------------------------------------------------------------------ the installed tasks and registries


def fresh_registry() -> Any:
    """A new registry loaded from the installed entry points; the process-wide one is left as it is. Add a
    test's own plugin to it (`.add_plugin(module, name=...)`) and hand it to `run_task` or `grade_requests`."""
    from .engine import Registry

    fresh = Registry()
    fresh.load_entry_points()
    return fresh


def register_toy_track() -> None:
    """Make sure the core's pure-Python toy track (`toy/vowels`) is in the process-wide registry; idempotent. The
    core's entry point `toy` registers it already; this adds it where the registry was built without it."""
    from importlib.metadata import entry_points

    from .engine import registry

    (point,) = entry_points(group="automedbench", name="toy")
    registry().add_plugin(point.load(), name="toy", distribution="automedbench")


def load_task(task_id: str) -> tuple[Track, TaskSpec]:
    """(track, task) of an installed task, as the runner finds it; UserError for an unknown id."""
    from .engine import registry

    return registry().task(task_id)


def warm_evaluator_installed() -> bool:
    """Whether the warm evaluator (automedbench-campaign) is installed: a test scoring many submissions of one
    task can score them on it (`warm_evaluator=True`, `backend="warm"`), with the cold path's verdicts."""
    from .engine import registry

    return "warm" in registry().components["evaluator"]


# ------------------------------------------------------------------ staging


def stage_from_folder(track: Any, task: Any, data_root: Path, source: Path) -> Any:
    """Stage `task` from a download folder `source` into `data_root`, as `automedbench stage T --from` does."""
    from .engine import stage

    return stage(track, task, data_root, source)


def ensure_staged(track: Any, task: Any, data_root: Path) -> StagedData:
    """Stage `task` from its generator (or reuse the staged copy) under `data_root`; its `StagedData`."""
    from .engine import ensure_staged as ensure

    return ensure(track, task, data_root)


def stage_task(task_id: str, data_root: Path) -> StagedData:
    """Stage (or reuse) a task under `data_root`; returns its `StagedData` (`automedbench.api.stage_task`)."""
    from .api import stage_task as stage

    return stage(task_id, data_root)


# ------------------------------------------------------------------ runs and evaluations


def run_task(task_id: str, agent: str, *, out: Path, data_root: Path, tier: str = "lite", registry: Any = None,
             **options: Any) -> tuple[Result, Path]:
    """One run through the real runner (sandbox, freeze, isolated evaluator, judge); (result, run folder).
    `options` are the run options (`agent_options`, `eval_options`, `warm_evaluator`, budgets, ...); a bad one
    raises UserError before the run starts. `registry` defaults to the process-wide one."""
    from .engine import Run, RunOptions
    from .engine import registry as default_registry

    runner = Run(RunOptions(task_id, tier, agent, out=out, data_root=data_root, **options),
                 registry if registry is not None else default_registry())
    return runner.execute(), runner.run_dir


def run_steps(task_id: str, steps: Sequence[tuple[str, str] | list[str]], *, out: Path, data_root: Path,
              tier: str = "lite", submit: bool = True, **options: Any) -> tuple[Result, Path]:
    """A run whose agent executes the given (language, code) steps in the sandbox, one call a turn, then submits
    (the test kit's `StepsAgent`, registered in the process-wide registry): how an attack is tried through the
    real runner. `options` as for `run_task`."""
    kit = _testkit("run_steps")
    kit.register_agent(kit.StepsAgent)
    agent_options = {**options.pop("agent_options", {}), "steps": [list(step) for step in steps]}
    if not submit:
        agent_options["submit"] = False
    return run_task(task_id, kit.StepsAgent.name, out=out, data_root=data_root, tier=tier,
                    agent_options=agent_options, **options)


def evaluate_outputs(task_id: str, *, data_root: Path, work: Path, submission: Path | None = None,
                     baseline: str | None = None, task_score: str | None = None,
                     eval_options: dict[str, str] | None = None, backend: str | None = None,
                     registry: Any = None) -> Result:
    """Score a folder of outputs (`submission`) or a track's baseline by name, as `automedbench evaluate` does:
    frozen, scored in the isolated evaluator (`backend`), graded, rated; the Result (also `work/result.json`).

    No `backend`: the evaluator a run of this process would score on (`warm_wanted`: under pytest the session's
    warm one where installed, same isolation and verdicts as the cold path), so a test does not start an
    interpreter, the track and its scorers per evaluation; a test of the cold path says `backend="process"`."""
    from .engine import EvaluateOptions, evaluate_folder
    from .engine import registry as default_registry
    from .options import RunOptions, warm_wanted

    reg = registry if registry is not None else default_registry()
    if backend is None:
        backend = "warm" if warm_wanted(RunOptions(task=task_id), "warm" in reg.components["evaluator"]) else "process"
    return evaluate_folder(reg, EvaluateOptions(
        task=task_id, data_root=data_root, work=work, submission=submission, baseline=baseline,
        task_score=task_score, eval_options=dict(eval_options or {}), backend=backend))


def evaluate_frozen(task_id: str, outputs: Path, *, data_root: Path, work: Path,
                    eval_options: dict[str, str] | None = None) -> Evaluation:
    """The evaluation of a folder of outputs in this process: frozen into `work/submission` as a run's outputs
    are, then checked and scored by the track (its grade requests left unanswered): for metric tests."""
    from .engine import ensure_staged as ensure

    track, task = load_task(task_id)
    return evaluate_staged(track, task, ensure(track, task, data_root), outputs, work, eval_options)


def evaluate_staged(track: Track, task: TaskSpec, staged: StagedData, outputs: Path, work: Path,
                    eval_options: dict[str, str] | None = None) -> Evaluation:
    """`evaluate_frozen` for a staging a test made itself (a task evolved, a track's stager given a generated
    download): a track's tests reach the freeze and the evaluator through this kit, never the engine."""
    from .engine import evaluate, freeze

    manifest = freeze(outputs, work / "submission", submitted=True)
    return evaluate(track, task, staged, work / "submission", manifest, dict(eval_options or {}))


def grade_requests(evaluation: Evaluation, task_id: str, eval_options: dict[str, str], folder: Path, *,
                   registry: Any = None) -> tuple[Evaluation, dict[str, Any]]:
    """The model-graded scoring step on an evaluation's grade requests, as a run takes it after the evaluator:
    (the evaluation with the grades folded in, the `grades.json` record written into `folder`)."""
    import json

    from .engine import GRADES_FILE, grade_evaluation
    from .engine import registry as default_registry

    reg = registry if registry is not None else default_registry()
    track, task = reg.task(task_id)
    graded = grade_evaluation(reg, track, task, evaluation, eval_options, folder)
    log = folder / GRADES_FILE
    return graded, json.loads(log.read_text()) if log.exists() else {}


def run_cli(*args: str, **invoke: Any) -> Any:
    """`automedbench ARGS...` in this process (click's test runner): the click Result (exit_code, stdout,
    stderr). `invoke` goes to `CliRunner.invoke` (`catch_exceptions=False`, `env=...`)."""
    from click.testing import CliRunner

    from .cli import main

    return CliRunner().invoke(main, list(args), **invoke)


# ------------------------------------------------------------------ briefs and rubrics


def render_task_brief(task_id: str, tier: str, *, data_dir: str = "/data/public", workspace_dir: str = "/workspace",
                      **extra: Any) -> str:
    """The brief an agent gets for an installed task at `tier` (the track's templates and the core's), with the
    sandbox paths given; `extra` fills any further template variable the brief uses."""
    from .engine import render_brief

    track, task = load_task(task_id)
    return render_brief(task, tier, track.template_dir(), data_dir=data_dir, workspace_dir=workspace_dir, **extra)


@frozen
class RulesGrading:
    """The rules judge on one trajectory: the rubric as settled for it, each graded item's verdict by id, and
    S1–S3 folded from them by the stage rules (what a run's result would hold)."""

    resolved: Resolved
    items: dict[str, ItemVerdict]
    stages: list[StageScore]


def grade_by_rules(task_id: str, tier: str, events: list[dict[str, Any]], *, plan: str | None = None,
                   plan_png: bytes | None = None, extra: dict[str, Any] | None = None,
                   rubric: Rubric | None = None) -> RulesGrading:
    """Grade trajectory `events` (tool-call dicts as `trajectory.jsonl` holds them) of an installed task with the
    rules judge, as a run does: the track's rubric (or `rubric`) settled for the tier and the events, the
    graded items judged from plan.md (`plan`), plan.png and the events (`extra`: e.g. `pilot_checks`)."""
    from .api import JudgeInput
    from .engine import judged_stages, registry, resolve_rubric, run_rubric

    track, task = load_task(task_id)
    resolved = (run_rubric(track, task, tier, events) if rubric is None
                else resolve_rubric(rubric, tier, events, track.rubric_conditions(task)))
    verdict = registry().create("judge", "rules").grade(JudgeInput(task, tier, resolved.graded, plan, plan_png,
                                                                   events, extra=dict(extra or {}),
                                                                   resolved=resolved))
    return RulesGrading(resolved, {v.id: v for v in verdict.items}, judged_stages(resolved, verdict, tier))


def rubric_problems(rubric: Rubric, conditions: Sequence[str] = (),
                    tiers: Sequence[str] = ("lite", "standard", "pro")) -> list[str]:
    """What `validate-task` and the runner would refuse in a rubric declaration (empty when sound); `conditions`
    are the condition names the track declares besides the core's."""
    from .engine import check_rubric

    return check_rubric(rubric, list(tiers), list(conditions))


# ------------------------------------------------------------------ reading results


def stage_scores(result: Result) -> dict[str, float | None]:
    """Stage id -> score of a result (None where the stage could not be scored)."""
    return {s.stage: s.score for s in result.stages}


def item_values(result: Result) -> dict[str, float | None]:
    """Rubric item id -> value over every stage of a result."""
    return {i.id: i.value for s in result.stages for i in s.items}


__all__ = sorted({*FROM_TESTKIT, "RulesGrading", "ensure_staged", "evaluate_frozen", "evaluate_outputs",
                  "evaluate_staged", "fresh_registry", "grade_by_rules", "grade_requests", "item_values", "load_task",
                  "pytest_configure", "register_toy_track", "render_task_brief", "rubric_problems", "run_cli",
                  "run_steps", "run_task", "stage_from_folder", "stage_scores", "stage_task",
                  "warm_evaluator_installed"})


def pytest_configure(config: Any) -> None:
    """Each checkout's tests stage into its own `.data` folder, not the per-user default every checkout
    on the host would share (an explicit AUTOMEDBENCH_DATA wins), and keep the harness state (key, signed
    caches) in its own `.state` folder (an explicit AUTOMEDBENCH_STATE wins), so test runs of other checkouts on
    the same disk never share caches. Disk promises stay machine-wide (their ledger is not in the state folder):
    the demos' small declared workspaces let every checkout's runs be promised theirs at once.

    Under pytest-xdist each worker takes a subfolder of both (`.data/gw0`, ...): staging writes in place and
    each state folder holds its own key (the results a worker signs are checked by that worker's readers), so
    two workers must not share them.

    Runs that do not choose their evaluator score on the warm one where it is installed (the sweeps' path:
    same isolation and scores, tests/test_warm_evaluator.py): no interpreter start per run, ~20 % less CPU in a
    run-heavy test file (what counts on a loaded machine; about the same wall on a quiet one);
    a test of the cold path says `warm_evaluator=False` (an explicit AUTOMEDBENCH_WARM_EVALUATOR=0 turns it off).
    Its process serves a whole session (up to 1000 evaluations) rather than a sweep's 50: a test worker makes a
    few hundred, and each fresh process loads its scorers again (torch and MONAI, METEOR's JVM: 2-12 s a start);
    tests of the restart set their own cap."""
    os.environ.setdefault("AUTOMEDBENCH_WARM_EVALUATOR", "1")  # options.WARM_EVALUATOR_ENV (not imported: light)
    os.environ.setdefault("AUTOMEDBENCH_WARM_EVAL_MAX", "1000")  # evalservice.MAX_REQUESTS_ENV (read per service)
    os.environ.setdefault("AUTOMEDBENCH_DATA", str(Path(config.rootpath) / ".data"))
    os.environ.setdefault("AUTOMEDBENCH_STATE", str(Path(config.rootpath) / ".state"))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker and os.environ.get(_SPLIT_FOR) != worker:  # once per worker (this hook may be registered twice)
        for var in ("AUTOMEDBENCH_DATA", "AUTOMEDBENCH_STATE"):
            os.environ[var] = str(Path(os.environ[var]) / worker)
        os.environ[_SPLIT_FOR] = worker


_SPLIT_FOR = "AUTOMEDBENCH_XDIST_FOLDERS_FOR"
# a folder the demo stagings of every test session of one test run are shared in (`amb_data_root`), set by the run's
# script: a demo staged by one session is copied by the next, not generated again (a stale one is staged afresh)
SHARED_DEMOS_ENV = "AUTOMEDBENCH_TEST_DEMOS"

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
        from .engine import registry

        return registry()

    @pytest.fixture(scope="session")
    def amb_data_root(tmp_path_factory) -> Path:
        """One data root per test session, so each task is staged once. Under pytest-xdist each worker has its
        own, and the demos in them are copies of one staging the workers share (`staging.share_demos`: the
        first worker to need a demo stages it, the others copy it): every worker generating every demo cost
        ~15 CPU-s a worker."""
        root = tmp_path_factory.mktemp("amb-data")
        shared = os.environ.get(SHARED_DEMOS_ENV, "")
        if shared or os.environ.get("PYTEST_XDIST_WORKER"):
            from .staging import share_demos

            # the workers' base folders (popen-gwN) lie in the session's own: the shared staging is this session's,
            # unless the test run names one for all its sessions (scripts/test.sh: the slow tier copies the demos
            # the fast tier staged, ~14 CPU-s of generation not repeated)
            share_demos(root, Path(shared) if shared else tmp_path_factory.getbasetemp().parent / "amb-demos")
        return root

    def _run_key_options(options: dict[str, Any]) -> dict[str, Any]:
        """The options that tell two `amb_run` runs apart: `warm_evaluator` naming the evaluator the run takes
        anyway (`warm_wanted`) is left out, so a file asking for the warm one explicitly and one taking the
        session's default share the run (enhancement/demo-ldct's reference run: ~7 CPU-s made twice)."""
        from .options import RunOptions, warm_wanted

        if options.get("warm_evaluator") is None:
            return options
        default = warm_wanted(RunOptions("-"), warm_evaluator_installed())
        return {k: v for k, v in options.items() if k != "warm_evaluator" or v != default}

    @pytest.fixture(scope="session")
    def amb_run(amb_data_root, tmp_path_factory) -> Callable[..., tuple[Result, Path]]:
        """`amb_run(task, agent, tier="lite", **options)`: run once per session per arguments, cached."""
        cache: dict[tuple, tuple[Result, Path]] = {}
        out = tmp_path_factory.mktemp("amb-runs")

        def _run(task_id: str, agent: str, tier: str = "lite", **options: Any) -> tuple[Result, Path]:
            key = (task_id, agent, tier, tuple(sorted((k, repr(v)) for k, v in _run_key_options(options).items())))
            if key not in cache:
                cache[key] = run_task(task_id, agent, out=out, data_root=amb_data_root, tier=tier, **options)
            return cache[key]

        return _run
