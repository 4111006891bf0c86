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
    # the toy declares a method with nothing to download (needs.weights: false): running it obtains it
    assert item_values(result)["s2a_model_obtained"] == 1.0 and scores["S2"] == 1.0, scores
    assert (run_dir / "result.json").is_file()


def test_toy_incomplete_run_is_gated(tmp_path):
    register_toy_track()
    result, _ = run_task(TASK, "incomplete", out=tmp_path / "runs", data_root=tmp_path / "data")
    assert result.state == "scored"
    assert result.task.strict == 0.0 and abs(result.task.partial - 2 / 6) < 1e-9
    assert result.aggregate.rating == "F"


def test_a_track_declared_variant_runs_through_the_scripted_agent(tmp_path):
    """`Track.scripted_variants`: the toy's own `count-y` replaces its batch; only the Task suffers."""
    register_toy_track()
    result, _ = run_task(TASK, "scripted", out=tmp_path / "runs", data_root=tmp_path / "data",
                         agent_options={"variant": "count-y"})
    assert result.state == "scored", result.error
    assert result.task.partial == 0.5  # radiology, pathology, biopsy: one vowel too many each
    scores = stage_scores(result)
    assert scores["S3"] == scores["S4"] == 1.0, scores


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

    calls: list[tuple[str, bool]] = []

    class SpySandbox(LocalSandbox):
        evaluator = "spy"

    def spy_backend(request, timeout_s):
        calls.append((request.task_id, request.check_only))
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
    # the pilot's contract check (check_only) and the final scoring both went through the spy
    assert sorted(calls) == [(TASK, False), (TASK, True)]


def test_a_third_party_model_backend_drives_the_chat_agent_and_the_llm_judge(tmp_path):
    """A provider registered by a plugin reaches every consumer by name; no consumer names providers."""
    import json

    from automedbench.api import hookimpl
    from automedbench.plugins import registry
    from automedbench.records import ToolCall
    from automedbench_models.chat import Backend, Completion

    class ScriptedProvider(Backend):
        provider = "scripted-provider"

        def make_client(self):
            return None

        def request(self, messages, *, tools, json_schema, max_tokens):
            if json_schema is not None:  # the judge asks for a verdict: grade every asked item 0
                items = json_schema["properties"]["items"]["required"]
                verdict = {i: {"value": 0, "rationale": "scripted", "evidence_turns": []} for i in items}
                return Completion(content=json.dumps({"items": verdict}))
            turns = sum(m["role"] == "assistant" for m in messages)
            if turns == 0:
                code = "print('hello')"
                return Completion(tool_calls=[ToolCall("c1", "execute_code",
                                                       json.dumps({"language": "python", "code": code}))])
            return Completion(tool_calls=[ToolCall("c2", "submit_results", "{}")])

    class ProviderPlugin:
        @staticmethod
        @hookimpl
        def automedbench_register_model_backends(register):
            register("scripted-provider", ScriptedProvider, "test provider")

    register_toy_track()
    registry().add_plugin(ProviderPlugin, name="scripted-provider-plugin")
    opts = {"provider": "scripted-provider", "model": "m1", "api_key_env": "none"}
    result, _ = run_task(TASK, "chat", out=tmp_path / "runs", data_root=tmp_path / "data",
                         agent_options=opts, judge="llm", judge_options=opts)
    assert result.state == "scored", result.error
    assert result.task.partial == 0.0  # it wrote nothing
    assert stage_scores(result)["S2"] == 0.0 and stage_scores(result)["S3"] == 0.0
    assert result.judge is not None and result.judge.error is None
    assert {i.rationale for s in result.stages for i in s.items if not i.auto and s.stage in ("S1", "S2", "S3")} == {
        "scripted"}  # every judged item came from the third-party provider's verdict


def test_an_unknown_model_backend_is_one_line_not_a_silent_fallback():
    import pytest
    from automedbench.api import UserError
    from automedbench_models.chat import make_backend

    with pytest.raises(UserError, match="unknown model 'gemini'"):
        make_backend("gemini", {"model": "x"})
