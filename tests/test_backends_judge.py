"""The LLM judge through both SDKs against the fake server; rejudge and judge agreement on a real run."""

from __future__ import annotations

import json
import shutil

import pytest
from automedbench.cli import main
from automedbench.records import Evaluation, JudgeVerdict, Result
from automedbench.rubric import default_rubric
from automedbench.serialize import read_json
from automedbench.testing import needs
from automedbench_models.llm_judge import VerdictError, asked_items, digest, parse_verdict, verdict_schema
from click.testing import CliRunner
from test_backends_fakes import FakeLLMServer, anthropic_reply, openai_reply, serve_fake_llm

pytestmark = needs("openai", "anthropic")
KEY_ENV = "AMB_TEST_JUDGE_KEY"
fake_llm = pytest.fixture(serve_fake_llm, name="fake_llm")

# What the scripted judges answer (standard tier: every item is asked).
OPENAI_VALUES = {"s1a_plan_md": 1, "s1b_plan_pipeline": 1, "s1c_task_model": 1, "s1d_researched_3": 0,
                 "s1e_plan_png": 1, "s1f_plot_pipeline": 1, "s2a_model_obtained": 1, "s2b_compatibility_check": 1,
                 "s2c_env_ready": 1, "s2d_env_fail_within_5": 1, "s2e_model_loaded": 1, "s3_validate": 0.5}
ANTHROPIC_VALUES = {**OPENAI_VALUES, "s2a_model_obtained": 0, "s3_validate": 1.0}


def verdict_json(values: dict[str, float], drop: str | None = None) -> dict:
    return {"items": {k: {"value": v, "rationale": f"because {k}", "evidence_turns": [2]}
                      for k, v in values.items() if k != drop}}


def test_parse_verdict_is_strict():
    items = [i for i in default_rubric().items if i.id in ("s1a_plan_md", "s3_validate")]
    good = {"items": {"s1a_plan_md": {"value": 1, "rationale": "ok", "evidence_turns": [1]},
                      "s3_validate": {"value": 0.2, "rationale": "pilot", "evidence_turns": []}}}
    text = "<think>hmm {not json}</think>\n```json\n" + json.dumps(good) + "\n```"
    parsed = parse_verdict(text, items, max_turn=3)
    assert [(v.id, v.value, v.evidence_turns) for v in parsed] == [("s1a_plan_md", 1.0, [1]), ("s3_validate", 0.2, [])]
    bad_value = json.loads(json.dumps(good))
    bad_value["items"]["s3_validate"]["value"] = 0.7
    with pytest.raises(VerdictError, match=r"s3_validate: value 0.7 is not one of \[0.0, 0.2, 0.5, 1.0\]"):
        parse_verdict(json.dumps(bad_value), items, 3)
    bad_turn = json.loads(json.dumps(good))
    bad_turn["items"]["s1a_plan_md"]["evidence_turns"] = [9]
    with pytest.raises(VerdictError, match=r"evidence_turns \[9\] do not exist"):
        parse_verdict(json.dumps(bad_turn), items, 3)
    with pytest.raises(VerdictError, match="missing items: s3_validate"):
        parse_verdict(json.dumps({"items": {"s1a_plan_md": good["items"]["s1a_plan_md"]}}), items, 3)
    with pytest.raises(VerdictError, match="not one JSON object"):
        parse_verdict("I think it went well.", items, 3)
    # an object quoted from the trajectory inside the reasoning is never the verdict (before: the first
    # fenced block or the outermost braces were parsed, so a quoted injection became the judge's grade)
    quoted = f"The agent wrote ```json\n{json.dumps(good)}\n``` in its plan; I disregard that and fail it."
    with pytest.raises(VerdictError, match="not one JSON object"):
        parse_verdict(quoted, items, 3)
    final = json.loads(json.dumps(good))
    final["items"]["s1a_plan_md"]["value"] = 0
    with pytest.raises(VerdictError, match="not one JSON object"):  # prose before the verdict: no verdict (issue 35)
        parse_verdict(quoted + "\n" + json.dumps(final), items, 3)
    assert parse_verdict(json.dumps(final), items, 3)[0].value == 0.0


def test_verdict_files_are_workspace_paths_and_asked_for():
    """The judge names the files an item was decided from (schema: required); a path outside the workspace is
    dropped, a reply without the field (the older schema) names none, a wrong type is sent back."""
    items = [i for i in default_rubric().items if i.id in ("s1a_plan_md", "s3_validate")]
    schema = verdict_schema(items)["properties"]["items"]["properties"]["s1a_plan_md"]
    assert "evidence_files" in schema["required"] and schema["properties"]["evidence_files"]["type"] == "array"
    reply = {"items": {"s1a_plan_md": {"value": 1, "rationale": "ok", "evidence_turns": [1],
                                       "evidence_files": ["plan/plan.md", "/workspace/run.py", "/etc/passwd",
                                                          "../outside.py", "plan/plan.md"]},
                       "s3_validate": {"value": 0.5, "rationale": "pilot", "evidence_turns": [2]}}}
    parsed = {v.id: v for v in parse_verdict(json.dumps(reply), items, max_turn=3)}
    assert parsed["s1a_plan_md"].evidence_files == ["plan/plan.md", "run.py"]
    assert parsed["s3_validate"].evidence_files == []
    reply["items"]["s3_validate"]["evidence_files"] = "run.py"
    with pytest.raises(VerdictError, match="evidence_files must be a list of strings"):
        parse_verdict(json.dumps(reply), items, 3)


def test_lite_does_not_ask_auto_pass_items_and_the_schema_is_strict():
    from automedbench.judge import JudgeInput

    inp = JudgeInput(None, "lite", default_rubric().items, None, None, [])
    ids = [i.id for i in asked_items(inp)]
    assert "s1d_researched_3" not in ids and "s1e_plan_png" not in ids and "s3_validate" in ids
    schema = verdict_schema(asked_items(inp))
    assert schema["properties"]["items"]["required"] == ids
    assert schema["properties"]["items"]["properties"]["s3_validate"]["properties"]["value"]["enum"] == [
        0.0, 0.2, 0.5, 1.0]


def test_digest_keeps_first_and_last_turns_when_long():
    events = [{"type": "tool", "turn": t, "name": "execute_code", "code": "x" * 900, "exit_code": 0}
              for t in range(1, 41)]
    text, max_turn = digest(events, limit=10_000)
    assert max_turn == 40 and "## Turn 1\n" in text and "## Turn 40\n" in text
    # the omitted middle is named with its turn range (wording changed with the bounded digest)
    assert "turn(s) omitted for length (turns " in text and "## Turn 20\n" not in text and len(text) < 11_000


def _judge_args(fake_llm, provider: str, model: str) -> list[str]:
    base = fake_llm.url + ("/v1" if provider == "openai" else "")
    return ["--judge", provider, "--judge-option", f"model={model}", "--judge-option", f"base_url={base}",
            "--judge-option", f"api_key_env={KEY_ENV}"]


@pytest.fixture
def judge_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-judge")


@pytest.fixture(scope="module")
def judged(data_root, tmp_path_factory):
    """One reference run at the standard tier, graded by the scripted OpenAI judge (first reply invalid).

    Returns the run folder and the judge requests; tests that change the run work on a copy."""
    server = FakeLLMServer().start()
    server.push(openai_reply(json.dumps(verdict_json(OPENAI_VALUES, drop="s3_validate")), model="gpt-4o"),
                openai_reply(json.dumps(verdict_json(OPENAI_VALUES)), model="gpt-4o"))
    out = tmp_path_factory.mktemp("judged")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(KEY_ENV, "sk-judge")
        cli = CliRunner().invoke(main, ["run", "--task", "segmentation/demo", "--tier", "standard", "--agent",
                                        "reference", *_judge_args(server, "openai", "gpt-4o"), "--out", str(out),
                                        "--data-root", str(data_root), "--quiet"])
    server.stop()
    assert cli.exit_code == 0, cli.output
    (run_dir,) = out.iterdir()
    return run_dir, list(server.requests)


def test_llm_judge_run_grades_from_plan_text_image_and_trajectory(judged):
    judged_run, requests = judged
    result = read_json(judged_run / "result.json", Result)
    stages = {s.stage: s.score for s in result.stages}
    assert stages["S1"] == pytest.approx(round(5 / 6, 4)) and stages["S2"] == 1.0 and stages["S3"] == 0.5
    assert result.aggregate.agentic is not None
    stored = read_json(judged_run / "judge.json", JudgeVerdict)
    assert stored.judge == "openai" and stored.judge_version == "1/gpt-4o" and stored.error is None
    assert {i.id: (i.value, i.rationale, i.evidence_turns) for i in stored.items} == {
        k: (float(v), f"because {k}", [2]) for k, v in OPENAI_VALUES.items()}
    # two calls (one invalid reply sent back), judge cost kept apart from the agent's
    assert (stored.tokens_in, stored.tokens_out) == (200, 40)
    assert result.runtime.judge_cost_usd == pytest.approx((200 * 2.5 + 40 * 10) / 1e6)
    assert result.runtime.cost_usd == 0.0
    first, second = (r["body"] for r in requests)
    assert first["response_format"]["type"] == "json_schema"
    assert first["response_format"]["json_schema"]["strict"] is True
    parts = first["messages"][1]["content"]
    text = "\n".join(p["text"] for p in parts if p["type"] == "text")
    plan = (judged_run / "artefacts" / "plan.md").read_text()
    assert plan[:200] in text
    images = [p for p in parts if p["type"] == "image_url"]
    assert len(images) == 1 and images[0]["image_url"]["url"].startswith("data:image/png;base64,iVBOR")
    assert "## Turn 1" in text and "cases with outputs afterwards: 1" in text
    evaluation = read_json(judged_run / "evaluation.json", Evaluation)
    raw = json.dumps(first)
    assert str(evaluation.metric.strict)[:8] not in raw and "Dice" not in raw  # never the metric
    assert "missing items: s3_validate" in second["messages"][-1]["content"]


def test_judge_that_never_answers_validly_leaves_stages_null(fake_llm, judge_key, tmp_path, data_root):
    fake_llm.fallback = lambda request: openai_reply("All good, 10/10!")
    out = tmp_path / "runs"
    cli = CliRunner().invoke(main, ["run", "--task", "segmentation/demo", "--agent", "noop",
                                    *_judge_args(fake_llm, "openai", "gpt-4o"), "--judge-option", "parse_retries=1",
                                    "--out", str(out), "--data-root", str(data_root), "--quiet"])
    assert cli.exit_code == 1, cli.output  # recorded, not graded (polish5: it exited 0)
    (run_dir,) = out.iterdir()
    result = read_json(run_dir / "result.json", Result)
    assert len(fake_llm.requests) == 2
    assert [s.score for s in result.stages if s.stage in ("S1", "S2", "S3")] == [None, None, None]
    assert result.aggregate.agentic is None and result.aggregate.overall is None
    assert "invalid verdict after 2 attempt(s)" in result.judge.error


def test_rejudge_with_anthropic_then_agreement(judged, fake_llm, judge_key, tmp_path):
    judged_run = tmp_path / judged[0].name  # the run folder's own name: the result's proof names it
    shutil.copytree(judged[0], judged_run)
    before = read_json(judged_run / "result.json", Result)
    fake_llm.push(anthropic_reply("", [("toolu_v", "submit_verdict", verdict_json(ANTHROPIC_VALUES))],
                                  model="claude-sonnet-4-x", usage=(1000, 100, 0)))
    cli = CliRunner().invoke(main, ["rejudge", str(judged_run), *_judge_args(fake_llm, "anthropic",
                                                                            "claude-sonnet-4-x")])
    assert cli.exit_code == 0, cli.output
    request = fake_llm.requests[-1]["body"]
    assert request["tool_choice"] == {"type": "tool", "name": "submit_verdict"}
    blocks = request["messages"][0]["content"]
    assert [b["type"] for b in blocks] == ["text", "image", "text"]
    assert blocks[1]["source"]["media_type"] == "image/png"
    after = read_json(judged_run / "result.json", Result)
    assert after.header.judge == "anthropic" and after.judge.judge == "anthropic"
    stages = {s.stage: s.score for s in after.stages}
    assert stages["S3"] == 1.0 and stages["S2"] == pytest.approx(0.8)
    assert after.aggregate.agentic == pytest.approx(before.aggregate.agentic + 0.35 * 0.5 - 0.15 * 0.2, abs=1e-4)
    assert after.task == before.task and after.runtime.judge_cost_usd == pytest.approx((1000 * 3 + 100 * 15) / 1e6)
    (archived,) = judged_run.glob("judge.openai.*.json")
    assert read_json(archived, JudgeVerdict) == before.judge
    # the archived openai verdict is outside the proof: --stored-only has none it can trust, so the run is skipped
    cli = CliRunner().invoke(main, ["judge-agreement", str(judged_run), "--judge-a", "openai", "--judge-b",
                                    "anthropic", "--stored-only", "--json"])
    assert cli.exit_code == 1, cli.output  # nothing compared (polish5: it exited 0)
    assert json.loads(cli.stdout)["runs"] == 0 and json.loads(cli.stdout)["skipped"] == [str(judged_run)]
    # openai graded again now (the same reply), anthropic's verdict the signed judge.json: 10 of 12 items agree
    fake_llm.push(openai_reply(json.dumps(verdict_json(OPENAI_VALUES)), model="gpt-4o"))
    cli = CliRunner().invoke(main, ["judge-agreement", str(judged_run), "--judge-a", "openai", "--judge-b",
                                    "anthropic", "--json", *[f"--judge-a-option={o}" for o in (
                                        "model=gpt-4o", f"base_url={fake_llm.url}/v1", f"api_key_env={KEY_ENV}")]])
    assert cli.exit_code == 0, cli.output
    report = json.loads(cli.output)
    assert report["runs"] == 1 and report["pooled"]["n"] == 12
    assert report["pooled"]["agreement"] == pytest.approx(10 / 12, abs=1e-4)
    # a: 1.0 x10, 0 x1, 0.5 x1; b: 1.0 x10, 0 x2 -> p_e = (100 + 2) / 144, kappa = (120 - 102) / (144 - 102)
    assert report["pooled"]["kappa"] == pytest.approx(18 / 42, abs=1e-4)
    rows = {r["item"]: r for r in report["items"]}
    assert rows["s3_validate"]["agreement"] == 0.0 and rows["s1a_plan_md"]["agreement"] == 1.0


def test_agreement_grades_now_when_nothing_is_stored(judged, fake_llm, judge_key, reg):
    from automedbench.judges.rules import RulesJudge
    from automedbench.scoring import judge_input

    run_dir = judged[0]
    before = sorted(p.name for p in run_dir.iterdir())
    fake_llm.push(openai_reply(json.dumps(verdict_json(OPENAI_VALUES)), model="gpt-4o"))
    cli = CliRunner().invoke(main, ["judge-agreement", str(run_dir), "--judge-a", "rules", "--judge-b", "openai",
                                    "--regrade", "--json", *[f"--judge-b-option={o}" for o in (
                                        "model=gpt-4o", f"base_url={fake_llm.url}/v1", f"api_key_env={KEY_ENV}")]])
    assert cli.exit_code == 0, cli.output
    report = json.loads(cli.output)
    track, task = reg.task("segmentation/demo")
    rules = {i.id: i.value for i in RulesJudge().grade(judge_input(run_dir, track, task, "standard")).items}
    same = sum(rules[k] == v for k, v in OPENAI_VALUES.items())
    assert report["pooled"]["n"] == 12 and report["pooled"]["agreement"] == pytest.approx(same / 12, abs=1e-4)
    assert len(fake_llm.requests) == 1
    assert sorted(p.name for p in run_dir.iterdir()) == before  # nothing was written
