"""A researcher swapping the judge model, round 28: two toy runs graded by the rules judge, re-graded by an
OpenAI-compatible judge on loopback (a fake server). A judge that could not grade (an unknown model, its endpoint
down, replies it never got right) replaced a graded run's verdict with nulls, and `rejudge` said "re-graded" and
exited 0; a leaderboard ranked a rules-graded run beside one graded by an LLM judge with no word of any judge; a
judge whose model has no known price cost "$0.0000" beside the tokens it spent, as if it were free."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import pytest
import test_cli_newuser
from automedbench.testing import needs
from test_backends_fakes import Reply, openai_reply, serve_fake_llm

pytestmark = needs("openai")
cli = test_cli_newuser.cli  # the new user's command line (CliRunner, errors as a pipe sees them), shared
fake_llm = pytest.fixture(serve_fake_llm, name="fake_llm")
KEY_ENV = "AMB_UX28_JUDGE_KEY"


def _verdict(request: dict[str, Any]) -> Reply:
    """Every item the judge is asked for at its highest level, whatever the rubric sends."""
    schema = request["body"]["response_format"]["json_schema"]["schema"]
    asked = schema["properties"]["items"]["properties"]
    items = {k: {"value": v["properties"]["value"]["enum"][-1], "rationale": "looks fine", "evidence_turns": [1],
                 "evidence_files": []} for k, v in asked.items()}
    return openai_reply(json.dumps({"items": items}), model=request["body"]["model"])


def _judge(fake_llm, model: str) -> list[str]:
    return ["--judge", "openai", "--judge-option", f"model={model}", "--judge-option", f"base_url={fake_llm.url}/v1",
            "--judge-option", f"api_key_env={KEY_ENV}"]


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def two_runs(cli, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-ux28")
    out = tmp_path / "runs"
    for agent in ("reference", "noop"):
        assert cli("run", "--task", "toy/vowels", "--agent", agent, "--out", out, "--quiet").exit_code == 0
    return out


def test_a_judge_that_cannot_grade_leaves_the_run_as_it_was(cli, two_runs, fake_llm):
    """Before: `rejudge --judge openai --judge-option model=<a model the server does not have>` wrote a verdict
    with no items over the rules judge's, so S1–S3, Agentic and Overall went null, printed "re-graded", exit 0."""
    fake_llm.fallback = lambda _request: Reply(404, {"error": {"message": "The model `gpt-4q` does not exist",
                                                               "code": "model_not_found"}})
    runs = sorted(two_runs.iterdir())
    before = {run.name: _digest(run / "result.json") for run in runs}
    done = cli("rejudge", two_runs, *_judge(fake_llm, "gpt-4q"))
    assert done.exit_code == 1, done.output
    said = " ".join(done.output.split())
    assert "re-graded" not in said.replace("not re-graded", "")
    for run in runs:
        assert f"{run}: not re-graded: the openai judge could not grade it: " in said, said
        assert _digest(run / "result.json") == before[run.name]
        assert json.loads((run / "judge.json").read_text())["judge"] == "rules"
        assert not list(run.glob("judge.rules.*.json"))  # nothing archived: nothing replaced
    assert "does not exist" in said and "the run keeps its rules judge (version 1) grade, unchanged" in said
    assert "2 of 2 run(s) not re-graded (left as they were). Next: check the judge's model" in said
    assert cli("verify", two_runs).exit_code == 0  # still the harness's runs, as signed


def test_a_leaderboard_names_the_judges_that_graded_its_runs(cli, two_runs, fake_llm):
    """Before: the leaderboard of a run graded by the rules judge and one re-graded by an LLM judge ranked them
    side by side and named no judge anywhere (the same table as when both were graded by rules)."""
    fake_llm.fallback = _verdict
    alone = cli("leaderboard", two_runs, "--resamples", "100")
    assert alone.exit_code == 0, alone.output
    assert "S1–S3 graded by one judge: rules (version 1), every run" in " ".join(alone.output.split())
    noop = next(run for run in two_runs.iterdir()
                if json.loads((run / "result.json").read_text())["header"]["agent"] == "noop")
    assert cli("rejudge", noop, *_judge(fake_llm, "judge-b")).exit_code == 0
    mixed = cli("leaderboard", two_runs, "--resamples", "100")
    assert mixed.exit_code == 0, mixed.output
    said = " ".join(mixed.output.split())
    assert ("S1–S3 graded by 2 judges (openai (version 1/judge-b): 1 run(s); rules (version 1): 1 run(s)): S1–S3, "
            "Agentic and Overall of rows graded by other judges do not compare") in said, said
    report = two_runs.parent / "board.json"
    assert cli("leaderboard", two_runs, "--resamples", "100", "--json", report).exit_code == 0
    judges = json.loads(report.read_text())["analyses"]["judges"]
    assert judges == {"openai (version 1/judge-b)": 1, "rules (version 1)": 1}
    made, page = two_runs.parent / "site", two_runs.parent / "board.html"
    assert cli("leaderboard", two_runs, "--site", made, "--html", page, "--quiet", "--resamples", "100").exit_code == 0
    for text in ((made / "index.html").read_text(), page.read_text()):  # the site's ranking, the HTML report
        assert "S1–S3 graded by 2 judges (openai (version 1/judge-b): 1 run(s); rules (version 1): 1 run(s))" in text


def test_a_judge_with_no_known_price_is_not_shown_as_free(cli, two_runs, fake_llm):
    """Before: `show` of a run graded by a model with no price printed "judge: $0.0000 (100 in / 20 out tokens)"
    and nothing else; a researcher read the judge as free (the README: an unknown model costs 0 "and says so")."""
    fake_llm.fallback = _verdict
    run = sorted(two_runs.iterdir())[0]
    assert cli("rejudge", run, *_judge(fake_llm, "unpriced-judge")).exit_code == 0
    shown = cli("show", run)
    said = " ".join(shown.output.split())
    assert "judge: $0.0000 (100 in / 20 out tokens)" in said, said
    assert "judge cost $0 for tokens spent: no price is known for its model" in said, said
    prices = two_runs.parent / "prices.yaml"
    prices.write_text("unpriced-judge: {input: 2.0, output: 8.0}\n")
    assert cli("rejudge", run, *_judge(fake_llm, "unpriced-judge"), "--judge-option", f"prices={prices}").exit_code == 0
    priced = " ".join(cli("show", run).output.split())
    assert "judge: $0.0004 (100 in / 20 out tokens)" in priced and "no price is known" not in priced, priced


def test_judge_agreement_names_each_model_and_why_a_run_was_skipped(cli, two_runs, fake_llm):
    """Before: two models of one backend were headed "openai vs openai over 2 run(s)", and a run the second judge
    could not grade was "skipped ...: no usable verdict from one of the judges", naming neither judge nor error."""
    def by_model(request: dict[str, Any]) -> Reply:
        if request["body"]["model"] == "gone":
            return Reply(404, {"error": {"message": "The model `gone` does not exist"}})
        return _verdict(request)

    fake_llm.fallback = by_model
    sides = [*(["--judge-a", "openai"] + [a.replace("--judge-option", "--judge-a-option")
                                          for a in _judge(fake_llm, "judge-a")[2:]]),
             *(["--judge-b", "openai"] + [a.replace("--judge-option", "--judge-b-option")
                                          for a in _judge(fake_llm, "judge-b")[2:]])]
    done = cli("judge-agreement", two_runs, *sides)
    assert done.exit_code == 0, done.output
    assert "openai (version 1/judge-a) vs openai (version 1/judge-b) over 2 run(s)" in done.output, done.output
    failed = cli("judge-agreement", two_runs, "--judge-a", "rules", "--judge-b", "openai",
                 *[a.replace("--judge-option", "--judge-b-option") for a in _judge(fake_llm, "gone")[2:]])
    said = " ".join(failed.output.split())
    assert "rules vs openai over 0 run(s)" in said, said
    for run in two_runs.iterdir():
        assert f"skipped {run}: the openai judge could not grade it: openai call to gone failed: " in said, said
    assert "no usable verdict" not in said


def test_the_summary_names_the_items_the_harness_capped(cli, two_runs, fake_llm):
    """Before: a judge that gave the agent that did nothing 1 on every item was shown as 0 everywhere, its 1 only
    inside each item's rationale (`show --items`, the run page); the summary of `rejudge` and `show` read as the
    judge's own zeros."""
    fake_llm.fallback = _verdict
    by_agent = {json.loads((run / "result.json").read_text())["header"]["agent"]: run for run in two_runs.iterdir()}
    regraded = cli("rejudge", two_runs, *_judge(fake_llm, "generous"))
    assert regraded.exit_code == 0, regraded.output
    noop = " ".join(cli("show", by_agent["noop"]).output.split())
    assert ("the harness capped 9 of the openai judge's item grade(s) to what it observed: s1a_plan_md, "
            "s1b_plan_pipeline, s1c_task_model, s2a_model_obtained") in noop, noop
    assert "s3_validate (why: `automedbench show <run> --items` or the run page)" in noop
    assert "the harness capped" not in cli("show", by_agent["reference"]).output  # nothing lowered: nothing said
    assert " ".join(regraded.output.split()).count("the harness capped 9 of") == 1


def test_the_sites_cost_chart_does_not_say_no_model_was_called_when_a_judge_was(cli, two_runs, fake_llm):
    """Before: with one run graded by an LLM judge whose model had no price, the site's cost chart said "every run
    here cost $0 (no model was called: scripted agents, the rules judge)"."""
    fake_llm.fallback = _verdict
    run = sorted(two_runs.iterdir())[0]
    assert cli("rejudge", run, *_judge(fake_llm, "unpriced-judge")).exit_code == 0
    made = two_runs.parent / "site"
    assert cli("leaderboard", two_runs, "--site", made, "--quiet", "--resamples", "100").exit_code == 0
    (caption,) = re.findall(r"<figcaption>Overall against cost[^<]*</figcaption>", (made / "index.html").read_text())
    assert "no model was called" not in caption, caption
    assert "every run here cost $0, though 1 run(s) spent model tokens: no price is known for their models" \
        in caption, caption


def test_a_slow_judge_is_told_apart_and_the_run_kept(cli, two_runs, fake_llm):
    """A judge slower than its timeout_s: the run keeps its grade, and the next step names timeout_s (the generic
    "check the model, base_url and key" sent a user to look at settings that were right)."""
    fake_llm.fallback = lambda request: Reply(200, _verdict(request).body, delay_s=3)
    run = sorted(two_runs.iterdir())[0]
    before = _digest(run / "result.json")
    done = cli("rejudge", run, *_judge(fake_llm, "slow"), "--judge-option", "timeout_s=1",
               "--judge-option", "max_retries=0")
    said = " ".join(done.output.split())
    assert done.exit_code == 1 and _digest(run / "result.json") == before, said
    assert "timed out" in said.lower() and "a longer --judge-option timeout_s= lets it answer" in said, said
