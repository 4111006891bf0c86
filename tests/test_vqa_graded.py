"""The VQA model answer judge (`answer_judge=llm`) through the model-graded scoring step, end to end: the
evaluator leaves grade requests, the harness asks a real OpenAI client against a local fake server after
the evaluation (`run` and `evaluate` alike), caches the grades, and falls back to the offline verdict,
counted, when the model cannot answer."""

from __future__ import annotations

import json
import re

import pytest
from automedbench import staging
from automedbench.agenttext import AGENT_TEXT_NOTE
from automedbench.cli import main
from automedbench.errors import UserError
from automedbench.runner import Run, RunOptions
from automedbench.testing import evaluate_outputs
from click.testing import CliRunner
from test_backends_fakes import Reply, error_reply, openai_reply, serve_fake_llm

DEMO = "vqa/demo"
fake_llm = pytest.fixture(serve_fake_llm, name="fake_llm")


def judge_options(server, model: str) -> dict[str, str]:
    return {"answer_judge": "llm", "answer_judge.provider": "openai", "answer_judge.model": model,
            "answer_judge.base_url": server.url + "/v1", "answer_judge.api_key_env": "none",
            "answer_judge.max_retries": "0"}


def grade_everything(score: float):
    def respond(request) -> Reply:
        system, user = (m["content"] for m in request["body"]["messages"])
        assert AGENT_TEXT_NOTE in system
        assert re.search(r"Prediction:\n<<<AGENT TEXT (\w{12})>>>\n.*\n<<<END AGENT TEXT \1>>>", user, re.S)
        return openai_reply(json.dumps({"score": score, "rationale": "scripted"}))
    return respond


@pytest.fixture(scope="module")
def vqa_staged(reg, data_root):
    track, task = reg.task(DEMO)
    return staging.ensure(track, task, data_root)


def test_evaluate_command_grades_open_answers_through_the_step(fake_llm, vqa_staged, data_root, tmp_path, reg):
    fake_llm.fallback = grade_everything(1.0)
    out = tmp_path / "out"
    args = ["evaluate", "--task", DEMO, "--baseline", "constant", "--data-root", str(data_root), "--out", str(out)]
    for key, value in judge_options(fake_llm, "fake-grader").items():
        args += ["--eval-option", f"{key}={value}"]
    done = CliRunner().invoke(main, args, catch_exceptions=False)
    assert done.exit_code == 0, done.output
    result = json.loads((out / "result.json").read_text())
    assert all(c["valid"] for c in result["cases"]) and result["state"] == "scored"
    rows = [r for r in result["task"]["per_case"] if r["kind"] in ("open", "closed")]
    graded = [r for r in rows if r.get("judge") == "llm@3:openai:fake-grader"]
    log = json.loads((out / "grades.json").read_text())
    # one request per text answer no shortcut decides: every open one, and (as the original) each yes/no one
    # whose strict reading is wrong; nothing else
    assert len(log["grades"]) == len(graded)
    assert sum(r["kind"] == "open" for r in graded) == 11
    closed = [r for r in rows if r["kind"] == "closed"]
    assert [r for r in closed if r.get("judge")] == [r for r in closed if r["exact_match"] < 1.0]
    # the demo repeats some (question, gold) pairs: the same prompt is sent once
    assert len(fake_llm.requests) == len({g["key"] for g in log["grades"]}) < len(graded)
    assert all(r["score"] == r["judge_score"] == 1.0 and not r["judge_fallback"] for r in graded)
    assert result["task"]["components"]["open_accuracy"] == 1.0  # 'yes' graded as right by the scripted model
    # the judge's grades count in the accuracy; yes_no_accuracy stays the strict reading (the original's)
    strict_yes_no = sum(r["exact_match"] for r in closed) / len(closed)
    assert strict_yes_no < 1.0 and result["task"]["components"]["yes_no_accuracy"] == pytest.approx(strict_yes_no)
    assert result["task"]["components"]["judge_fallback_count"] == 0
    assert log["graders"][0]["model"] == "fake-grader" and log["graders"][0]["answered"] == len(graded)
    offline = evaluate_outputs(DEMO, baseline="constant", data_root=data_root, work=tmp_path / "offline",
                               eval_options={"answer_judge": "offline"}, registry=reg)
    assert result["task"]["partial"] > offline.task.partial
    # offline re-scoring again: every grade comes from the cache, no request reaches the server
    sent = len(fake_llm.requests)
    again = evaluate_outputs(DEMO, baseline="constant", data_root=data_root, work=tmp_path / "again",
                             eval_options=judge_options(fake_llm, "fake-grader"), registry=reg)
    assert len(fake_llm.requests) == sent and again.task.partial == result["task"]["partial"]
    assert all(r["judge_cached"] for r in again.task.per_case if r.get("judge"))


def test_unreachable_grader_falls_back_to_the_offline_verdict_counted(fake_llm, vqa_staged, data_root, tmp_path,
                                                                      reg):
    fake_llm.fallback = lambda request: error_reply(500)
    result = evaluate_outputs(DEMO, baseline="constant", data_root=data_root, work=tmp_path / "down",
                              eval_options=judge_options(fake_llm, "down-grader"), registry=reg)
    offline = evaluate_outputs(DEMO, baseline="constant", data_root=data_root, work=tmp_path / "offline",
                               eval_options={"answer_judge": "offline"}, registry=reg)
    assert result.state == "scored" and result.task.partial == offline.task.partial
    pending = [r for r in result.task.per_case if r.get("judge")]
    assert pending and all(r["judge_fallback"] and r["judge_score"] is None for r in pending)
    assert result.task.components["judge_fallback_count"] == len(pending)
    assert len(fake_llm.requests) == 3  # three failures in a row, then the rest are not sent
    log = json.loads((tmp_path / "down" / "grades.json").read_text())
    assert log["graders"][0]["failed"] == len(pending) and "500" in log["graders"][0]["error"]


def test_a_run_goes_through_the_same_step(fake_llm, vqa_staged, data_root, tmp_path, reg):
    fake_llm.fallback = grade_everything(0.5)
    run = Run(RunOptions(DEMO, "lite", "reference", out=tmp_path, data_root=data_root,
                         eval_options=judge_options(fake_llm, "run-grader")), reg)
    result = run.execute()
    assert result.state == "scored"
    graded = [r for r in result.task.per_case if r.get("judge") == "llm@3:openai:run-grader"]
    assert graded and all(r["judge_score"] == 0.5 for r in graded)
    log = json.loads((run.run_dir / "grades.json").read_text())
    assert len(fake_llm.requests) == len({g["key"] for g in log["grades"]})
    stored = json.loads((run.run_dir / "evaluation.json").read_text())
    assert stored["metric"]["components"] == json.loads((run.run_dir / "result.json").read_text())["task"][
        "components"]


def test_model_judge_options_are_checked_up_front(reg, data_root, tmp_path):
    with pytest.raises(UserError, match="go together"):
        evaluate_outputs(DEMO, baseline="constant", data_root=data_root, work=tmp_path / "a",
                         eval_options={"answer_judge": "llm"}, registry=reg)
    with pytest.raises(UserError, match="go together"):
        evaluate_outputs(DEMO, baseline="constant", data_root=data_root, work=tmp_path / "b",
                         eval_options={"answer_judge.provider": "openai", "answer_judge.model": "m",
                                      "answer_judge.api_key_env": "none"}, registry=reg)
    with pytest.raises(UserError, match=r"need answer_judge\.provider"):
        evaluate_outputs(DEMO, baseline="constant", data_root=data_root, work=tmp_path / "c",
                         eval_options={"answer_judge": "llm", "answer_judge.model": "m"}, registry=reg)
    with pytest.raises(UserError, match=r"no evaluation option 'judge\.model'"):
        evaluate_outputs(DEMO, baseline="constant", data_root=data_root, work=tmp_path / "d",
                         eval_options={"judge.model": "m"}, registry=reg)
