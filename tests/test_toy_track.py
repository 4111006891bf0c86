"""The toy track: a third-party-style track on the public API, run end to end through the real runner."""

from __future__ import annotations

from automedbench.testing import check_track, item_values, register_toy_track, run_task, stage_scores

TASK = "toy/vowels"


def test_toy_reference_run_scores_every_stage(tmp_path):
    register_toy_track()
    result, run_dir = run_task(TASK, "reference", out=tmp_path / "runs", data_root=tmp_path / "data")
    assert result.state == "scored", result.error
    assert result.task.strict == result.task.partial == 1.0
    scores = stage_scores(result)
    assert scores["S4"] == 1.0 and scores["S5"] == 1.0 and scores["S3"] == 1.0, scores
    assert item_values(result)["s1a_plan_md"] == 1.0
    assert (run_dir / "result.json").is_file()


def test_toy_incomplete_run_is_gated(tmp_path):
    register_toy_track()
    result, _ = run_task(TASK, "incomplete", out=tmp_path / "runs", data_root=tmp_path / "data")
    assert result.state == "scored"
    assert result.task.strict == 0.0 and abs(result.task.partial - 2 / 6) < 1e-9
    assert result.aggregate.rating == "F"


def test_toy_track_passes_the_conformance_check(tmp_path):
    register_toy_track()
    ok, report = check_track(TASK, tmp_path / "data")
    assert ok, report
    assert "perfect" in report


SEEN: list[str] = []


def _failing_subscriber(result, run_dir, registry, output_names):
    """A third-party subscriber to the run-finished hook: it records the run and then fails."""
    SEEN.append(result.header.run_id)
    raise RuntimeError("subscriber bug")


def test_run_finished_hook_reaches_subscribers_and_contains_their_failures(tmp_path):
    from automedbench.api import hookimpl
    from automedbench.plugins import registry

    register_toy_track()
    watcher = type("Watcher", (), {"automedbench_run_finished": staticmethod(
        hookimpl(specname="automedbench_run_finished")(_failing_subscriber))})
    registry().pm.register(watcher, name="finished-watcher")
    try:
        result, _ = run_task(TASK, "reference", out=tmp_path / "runs", data_root=tmp_path / "data")
    finally:
        registry().pm.unregister(name="finished-watcher")
    assert [result.header.run_id] == SEEN
    assert result.state == "scored"
    hook_codes = [c for c in result.error_codes if c.code == "H-HOOK"]
    assert len(hook_codes) == 1 and "subscriber bug" in hook_codes[0].message


def test_a_sandbox_names_its_evaluator_backend_and_the_registry_supplies_it(tmp_path):
    """Evaluator backends are a plugin kind: a third-party sandbox can ask for its own evaluator."""
    from automedbench.api import hookimpl
    from automedbench.evaluator import evaluate_in_process
    from automedbench.plugins import registry
    from automedbench.sandboxes.local import LocalSandbox

    calls: list[str] = []

    class SpySandbox(LocalSandbox):
        evaluator = "spy"

    def spy_backend(request, timeout_s):
        calls.append(request.task_id)
        return evaluate_in_process(request, timeout_s)

    class SpyPlugin:
        @staticmethod
        @hookimpl
        def automedbench_register_evaluators(register):
            register("spy", lambda: spy_backend, "records each evaluation")

        @staticmethod
        @hookimpl
        def automedbench_register_sandboxes(register):
            register("spy-local", lambda: SpySandbox("auto"), "local sandbox scored by the spy evaluator")

    register_toy_track()
    registry().add_plugin(SpyPlugin, name="spy-plugin")
    result, _ = run_task(TASK, "reference", out=tmp_path / "runs", data_root=tmp_path / "data", sandbox="spy-local")
    assert result.state == "scored" and result.task.strict == 1.0
    assert calls == [TASK]
