"""The OpenAI-compatible agent driven through the real `openai` SDK against a local fake server."""

from __future__ import annotations

import json
import os

import pytest
from automedbench.agent import TOOLS, AgentContext
from automedbench.cli import main
from automedbench.errors import AgentError, UserError
from automedbench.records import Result
from automedbench.serialize import read_json
from automedbench.testing import needs
from automedbench.trajectory import read_events
from automedbench_models.chat import TRUNCATED_NUDGE
from automedbench_models.chat_common import ELIDED
from automedbench_models.openai_chat import OpenAIChatAgent
from click.testing import CliRunner
from test_backends_fakes import ReferenceModel, Reply, error_reply, openai_reply, serve_fake_llm

pytestmark = needs("openai")
KEY_ENV = "AMB_TEST_OPENAI_KEY"
fake_llm = pytest.fixture(serve_fake_llm, name="fake_llm")
MESSAGES = [{"role": "system", "content": "brief"}, {"role": "user", "content": "Begin."}]


@pytest.fixture
def agent_for(fake_llm, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-fake-123")
    made = []

    def make(**options):
        opts = {"model": "gpt-4o-mini-2024-07-18", "base_url": fake_llm.url + "/v1", "api_key_env": KEY_ENV,
                "timeout_s": "10", **options}
        agent = OpenAIChatAgent(**opts)
        agent.start(AgentContext(None, "lite", "brief", "Begin.", TOOLS, "/data", "/ws"))
        waits: list[float] = []
        agent.backend.sleep = waits.append
        agent.waits = waits
        made.append(agent)
        return agent

    yield make
    for agent in made:
        agent.close()


def test_tool_call_reasoning_usage_and_cost(agent_for, fake_llm):
    fake_llm.push(openai_reply("Listing the data.", [("call_1", "execute_code",
                                                      '{"language": "bash", "code": "ls /data"}')],
                               reasoning="I should look first.", usage=(1200, 80, 200)))
    agent = agent_for()
    turn = agent.next_turn(MESSAGES)
    assert turn.content == "Listing the data." and turn.reasoning == "I should look first."
    assert [(c.id, c.name, json.loads(c.arguments)) for c in turn.tool_calls] == [
        ("call_1", "execute_code", {"language": "bash", "code": "ls /data"})]
    assert (turn.tokens_in, turn.tokens_out, turn.tokens_cached) == (1200, 80, 200)
    # gpt-4o-mini list price: 0.15 in, 0.075 cached in, 0.60 out per 1M
    assert turn.cost_usd == pytest.approx((1000 * 0.15 + 200 * 0.075 + 80 * 0.60) / 1e6)
    request = fake_llm.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["authorization"] == "Bearer sk-fake-123"
    body = request["body"]
    assert body["model"] == "gpt-4o-mini-2024-07-18" and body["tool_choice"] == "auto"
    assert [t["function"]["name"] for t in body["tools"]] == ["execute_code", "submit_results"]
    assert body["messages"] == MESSAGES and body["max_tokens"] == 4096 and body["temperature"] == 0.0


def test_reasoning_models_get_max_completion_tokens_and_no_temperature(agent_for, fake_llm):
    reply = openai_reply("ok")
    message = reply.body["choices"][0]["message"]
    message["reasoning"] = "OpenRouter-style reasoning field"
    fake_llm.push(reply)
    turn = agent_for(model="o4-mini", reasoning_effort="low").next_turn(MESSAGES)
    body = fake_llm.requests[0]["body"]
    assert body["max_completion_tokens"] == 4096 and "max_tokens" not in body and "temperature" not in body
    assert body["reasoning_effort"] == "low" and turn.reasoning == "OpenRouter-style reasoning field"


def test_429_waits_for_retry_after_then_succeeds(agent_for, fake_llm):
    fake_llm.push(error_reply(429, retry_after="7"), error_reply(503), openai_reply("ok"))
    agent = agent_for(backoff_s="0.5")
    turn = agent.next_turn(MESSAGES)
    assert turn.content == "ok" and len(fake_llm.requests) == 3
    assert agent.waits[0] == 7.0  # the server's Retry-After, not our back-off
    assert 1.0 <= agent.waits[1] <= 1.25  # second failure, no header: 0.5 * 2**1 plus up to 0.25 jitter
    assert [r["status"] for r in agent.backend.retries] == [429, 503]


def test_retry_after_is_capped_and_attempts_are_bounded(agent_for, fake_llm):
    fake_llm.push(*[error_reply(500, retry_after="3600")] * 3)
    agent = agent_for(max_retries="2", max_backoff_s="5")
    with pytest.raises(AgentError, match=r"failed after 3 attempts: InternalServerError 500") as info:
        agent.next_turn(MESSAGES)
    assert agent.waits == [5.0, 5.0] and len(fake_llm.requests) == 3
    assert "\n" not in str(info.value)


def test_timeouts_and_non_json_bodies_are_retried(agent_for, fake_llm):
    slow = openai_reply("too late")
    slow.delay_s = 3.0
    fake_llm.push(slow, Reply(200, raw=b"<html>bad gateway</html>"), openai_reply("in time"))
    agent = agent_for(timeout_s="1.0")
    assert agent.next_turn(MESSAGES).content == "in time"
    assert [r["error"] for r in agent.backend.retries] == ["APITimeoutError", "JSONDecodeError"]


def test_client_errors_are_not_retried(agent_for, fake_llm):
    fake_llm.push(error_reply(401), openai_reply("never reached"))
    agent = agent_for()
    with pytest.raises(AgentError, match="401"):
        agent.next_turn(MESSAGES)
    assert len(fake_llm.requests) == 1 and agent.waits == []


def test_malformed_arguments_are_repaired(agent_for, fake_llm):
    broken = '{"language": "python", "code": "import os\nprint(os.getcwd())",}'
    fake_llm.push(openai_reply("", [("c1", "execute_code", broken)]))
    turn = agent_for().next_turn(MESSAGES)
    call = turn.tool_calls[0]
    assert json.loads(call.arguments) == {"language": "python", "code": "import os\nprint(os.getcwd())"}
    assert call.error.startswith("arguments repaired")


def test_length_cut_reply_is_continued_with_a_nudge(agent_for, fake_llm):
    fake_llm.push(openai_reply("Let me explain at great length", finish_reason="length", usage=(500, 4096, 0)),
                  openai_reply("Short now.", [("c2", "submit_results", "{}")], usage=(600, 30, 0)))
    turn = agent_for().next_turn(MESSAGES)
    assert [c.name for c in turn.tool_calls] == ["submit_results"]
    assert (turn.tokens_in, turn.tokens_out) == (1100, 4126)
    second = fake_llm.requests[1]["body"]["messages"]
    assert second[-2] == {"role": "assistant", "content": "Let me explain at great length"}
    assert second[-1] == {"role": "user", "content": TRUNCATED_NUDGE}


def test_long_history_is_trimmed_before_sending_and_reported(agent_for, fake_llm):
    history = list(MESSAGES)
    for t in range(6):
        history += [{"role": "assistant", "content": f"step {t}", "tool_calls": [
            {"id": f"c{t}", "type": "function", "function": {"name": "execute_code", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": f"c{t}", "content": f"output {t} " + "x" * 8000}]
    fake_llm.push(openai_reply("ok"))
    agent = agent_for(context_window="9000", max_tokens="1000", keep_turns="2")
    agent.next_turn(history)
    sent = fake_llm.requests[0]["body"]["messages"]
    tools = [m["content"] for m in sent if m["role"] == "tool"]
    assert len(sent) == len(history) and tools[:4] == [ELIDED] * 4
    assert tools[4].startswith("output 4") and tools[5].startswith("output 5")
    assert agent.drain_events() == [{"type": "context_trimmed", "elided": 4, "dropped": 0}]
    assert history[3]["content"].startswith("output 0")  # the runner's list is untouched


def test_missing_key_fails_before_anything_is_sent(fake_llm, monkeypatch, tmp_path):
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(UserError, match=f"{KEY_ENV} is not set"):
        OpenAIChatAgent(model="m", base_url=fake_llm.url + "/v1", api_key_env=KEY_ENV)
    out = tmp_path / "runs"
    result = CliRunner().invoke(main, ["run", "--task", "segmentation/demo", "--agent", "openai", "--agent-option",
                                       "model=m", "--agent-option", f"api_key_env={KEY_ENV}", "--out", str(out)])
    assert result.exit_code == 2 and f"{KEY_ENV} is not set" in result.output
    assert not out.exists() and fake_llm.requests == []


def test_full_demo_run_with_scripted_openai_server(fake_llm, monkeypatch, tmp_path, reg, data_root,
                                                   run_agent):
    """`automedbench run --agent openai`: the server's replies replay the reference solution's tool calls."""
    monkeypatch.setenv(KEY_ENV, "sk-fake-123")
    prices = tmp_path / "prices.yaml"
    prices.write_text("pricing:\n  fake-model: {input: 1.0, output: 2.0}\n")
    models = tmp_path / "agents.yaml"
    models.write_text(f"models:\n  local:\n    provider: openai\n    model: fake-model\n"
                      f"    base_url: {fake_llm.url}/v1\n    api_key_env: {KEY_ENV}\n")
    fake_llm.push(error_reply(429, retry_after="1"))
    fake_llm.fallback = ReferenceModel(reg, "segmentation/demo", "lite", "openai", raw_newlines_at=3)
    out = tmp_path / "runs"
    cli = CliRunner().invoke(main, [
        "run", "--task", "segmentation/demo", "--agent", "openai", "--agent-option", f"config={models}",
        "--agent-option", "entry=local", "--agent-option", f"prices={prices}", "--out", str(out),
        "--data-root", str(data_root), "--quiet"])
    assert cli.exit_code == 0, cli.output
    (run_dir,) = out.iterdir()
    result = read_json(run_dir / "result.json", Result)
    reference, _ = run_agent("reference")
    assert result.state == "scored" and result.end_reason == "submitted"
    assert {s.stage: s.score for s in result.stages} == {s.stage: s.score for s in reference.stages}
    assert result.aggregate.overall == reference.aggregate.overall
    steps = len(fake_llm.fallback.steps)
    assert result.runtime.turns == steps and len(fake_llm.requests) == steps + 1  # one 429 retried
    assert result.runtime.tokens_in == 100 * steps and result.runtime.tokens_out == 20 * steps
    assert result.runtime.cost_usd == pytest.approx(steps * (100 * 1.0 + 20 * 2.0) / 1e6)
    assert f"agent: {100 * steps} in / {20 * steps} out tokens, ${steps * 140e-6:.4f}" in cli.output
    events = read_events(run_dir / "trajectory.jsonl")
    assistant = [e for e in events if e["type"] == "assistant"]
    assert assistant[0]["reasoning"] == "reasoning about step 1"
    assert [(e["type"], e["turn"], e["status"], e["wait_s"]) for e in events if e.get("imported")] == [
        ("api_retry", 1, 429, 1.0)]
    repaired = next(e for e in events if e["type"] == "tool" and e["turn"] == 3)
    assert repaired["exit_code"] == 0 and "error" not in repaired  # raw newlines repaired, the call ran
    last = fake_llm.requests[-1]["body"]["messages"]
    assert last[-1]["role"] == "tool" and last[-1]["content"].startswith("exit_code: 0")


@pytest.mark.skipif(not os.environ.get("OPENAI_API_KEY"),
                    reason="needs OPENAI_API_KEY for a live call; the fake-server tests cover the wire format")
def test_live_openai_smoke():
    agent = OpenAIChatAgent(model=os.environ.get("AMB_LIVE_OPENAI_MODEL", "gpt-4o-mini"), max_tokens="200")
    agent.start(AgentContext(None, "lite", "brief", "Begin.", TOOLS, "/data", "/ws"))
    turn = agent.next_turn([{"role": "system", "content": "Call execute_code with bash `echo hi`."},
                            {"role": "user", "content": "Go."}])
    assert turn.tokens_in > 0 and turn.tool_calls
