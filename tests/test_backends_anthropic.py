"""The Anthropic agent through the real `anthropic` SDK against a local fake messages endpoint."""

from __future__ import annotations

import json
import os

import pytest
from automedbench.agent import TOOLS, AgentContext
from automedbench.cli import main
from automedbench.errors import AgentError
from automedbench.records import Result
from automedbench.serialize import read_json
from automedbench.testing import needs
from automedbench.trajectory import read_events
from automedbench_models.anthropic_chat import AnthropicChatAgent, convert
from click.testing import CliRunner
from test_backends_fakes import ReferenceModel, anthropic_reply, error_reply, serve_fake_llm

pytestmark = needs("anthropic")
KEY_ENV = "AMB_TEST_ANTHROPIC_KEY"
fake_llm = pytest.fixture(serve_fake_llm, name="fake_llm")
MESSAGES = [{"role": "system", "content": "brief"}, {"role": "user", "content": "Begin."}]


@pytest.fixture
def agent_for(fake_llm, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-ant-fake")
    made = []

    def make(**options):
        agent = AnthropicChatAgent(model="claude-sonnet-4-20250514", base_url=fake_llm.url, api_key_env=KEY_ENV,
                                   timeout_s="10", **options)
        agent.start(AgentContext(None, "lite", "brief", "Begin.", TOOLS, "/data", "/ws"))
        agent.waits = []
        agent.backend.sleep = agent.waits.append
        made.append(agent)
        return agent

    yield make
    for agent in made:
        agent.close()


def test_conversion_merges_tool_results_and_keeps_alternation():
    messages = [
        {"role": "system", "content": "the brief"},
        {"role": "user", "content": "Begin."},
        {"role": "assistant", "content": "Two calls.", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "execute_code", "arguments": '{"code": "1"}'}},
            {"id": "b", "type": "function", "function": {"name": "execute_code", "arguments": "{broken"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "exit_code: 0"},
        {"role": "tool", "tool_call_id": "b", "content": "ERROR: bad arguments"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "submit_results", "arguments": ""}}]},
    ]
    thinking = {("c",): [{"type": "thinking", "thinking": "t", "signature": "s"}]}
    system, out = convert(messages, thinking)
    assert system == "the brief"
    assert [m["role"] for m in out] == ["user", "assistant", "user", "assistant"]
    assert [b["type"] for b in out[1]["content"]] == ["text", "tool_use", "tool_use"]
    assert out[1]["content"][1]["input"] == {"code": "1"}
    assert out[1]["content"][2]["input"] == {"_unparsed_arguments": "{broken"}
    assert [(b["tool_use_id"], b["content"]) for b in out[2]["content"]] == [
        ("a", "exit_code: 0"), ("b", "ERROR: bad arguments")]
    assert out[3]["content"][0] == {"type": "thinking", "thinking": "t", "signature": "s"}
    assert out[3]["content"][1] == {"type": "tool_use", "id": "c", "name": "submit_results", "input": {}}


def test_tool_use_thinking_usage_and_cost(agent_for, fake_llm):
    fake_llm.push(anthropic_reply("Looking.", [("toolu_1", "execute_code", {"language": "bash", "code": "ls"})],
                                  thinking="plan first", usage=(300, 50, 700)))
    agent = agent_for()
    turn = agent.next_turn(MESSAGES)
    assert turn.content == "Looking." and turn.reasoning == "plan first"
    assert [(c.id, c.name, json.loads(c.arguments)) for c in turn.tool_calls] == [
        ("toolu_1", "execute_code", {"language": "bash", "code": "ls"})]
    assert (turn.tokens_in, turn.tokens_out, turn.tokens_cached) == (1000, 50, 700)
    # claude-sonnet-4 list price: 3 in, 0.30 cache read, 15 out per 1M
    assert turn.cost_usd == pytest.approx((300 * 3 + 700 * 0.30 + 50 * 15) / 1e6)
    request = fake_llm.requests[0]
    headers = request["headers"]
    assert request["path"] == "/v1/messages" and "anthropic-version" in headers
    assert "sk-ant-fake" in headers.get("x-api-key", "") + headers.get("authorization", "")  # SDK-version dependent
    body = request["body"]
    assert body["system"] == "brief" and body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Begin."}]}]
    assert [t["name"] for t in body["tools"]] == ["execute_code", "submit_results"]
    assert body["tools"][0]["input_schema"]["required"] == ["language", "code"]
    # the next request sends the thinking block back, signature included, before the tool_use
    fake_llm.push(anthropic_reply("Done."))
    history = [*MESSAGES, {"role": "assistant", "content": "Looking.", "tool_calls": [
        {"id": "toolu_1", "type": "function", "function": {"name": "execute_code",
                                                           "arguments": turn.tool_calls[0].arguments}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "exit_code: 0"}]
    agent.next_turn(history)
    sent = fake_llm.requests[1]["body"]["messages"][1]["content"]
    assert sent[0] == {"type": "thinking", "thinking": "plan first", "signature": "sig-10"}
    assert [b["type"] for b in sent[1:]] == ["text", "tool_use"]


def test_overloaded_529_and_429_are_retried_with_retry_after(agent_for, fake_llm):
    fake_llm.push(error_reply(529, anthropic=True), error_reply(429, retry_after="4", anthropic=True),
                  anthropic_reply("fine"))
    agent = agent_for(backoff_s="0.2")
    assert agent.next_turn(MESSAGES).content == "fine"
    assert agent.waits[1] == 4.0 and 0.2 <= agent.waits[0] <= 0.3
    fake_llm.push(error_reply(400, anthropic=True))
    with pytest.raises(AgentError, match="400"):
        agent.next_turn(MESSAGES)


def test_max_tokens_stop_is_continued(agent_for, fake_llm):
    fake_llm.push(anthropic_reply("rambling", stop_reason="max_tokens"),
                  anthropic_reply("", [("t2", "submit_results", {})]))
    turn = agent_for().next_turn(MESSAGES)
    assert [c.name for c in turn.tool_calls] == ["submit_results"] and turn.content == "rambling"
    second = fake_llm.requests[1]["body"]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]


def test_full_demo_run_with_scripted_anthropic_server(fake_llm, monkeypatch, tmp_path, reg, data_root, run_agent):
    monkeypatch.setenv(KEY_ENV, "sk-ant-fake")
    fake_llm.fallback = ReferenceModel(reg, "segmentation/demo", "lite", "anthropic")
    out = tmp_path / "runs"
    cli = CliRunner().invoke(main, [
        "run", "--task", "segmentation/demo", "--agent", "anthropic", "--agent-option", "model=claude-3-5-haiku-x",
        "--agent-option", f"base_url={fake_llm.url}", "--agent-option", f"api_key_env={KEY_ENV}",
        "--out", str(out), "--data-root", str(data_root), "--quiet"])
    assert cli.exit_code == 0, cli.output
    (run_dir,) = out.iterdir()
    result = read_json(run_dir / "result.json", Result)
    reference, _ = run_agent("reference")
    assert result.end_reason == "submitted"
    assert {s.stage: s.score for s in result.stages} == {s.stage: s.score for s in reference.stages}
    steps = len(fake_llm.fallback.steps)
    assert result.runtime.cost_usd == pytest.approx(steps * (100 * 0.8 + 20 * 4.0) / 1e6)
    events = read_events(run_dir / "trajectory.jsonl")
    assert [e["reasoning"] for e in events if e["type"] == "assistant"][:2] == [
        "thinking about step 1", "thinking about step 2"]
    # every later request carries the earlier thinking blocks back with their tool_use blocks
    last = fake_llm.requests[-1]["body"]["messages"]
    assert last[1]["content"][0]["type"] == "thinking"


@pytest.mark.skipif(not os.environ.get("ANTHROPIC_API_KEY"),
                    reason="needs ANTHROPIC_API_KEY for a live call; the fake-server tests cover the wire format")
def test_live_anthropic_smoke():
    agent = AnthropicChatAgent(model=os.environ.get("AMB_LIVE_ANTHROPIC_MODEL", "claude-3-5-haiku-latest"),
                               max_tokens="200")
    agent.start(AgentContext(None, "lite", "brief", "Begin.", TOOLS, "/data", "/ws"))
    turn = agent.next_turn([{"role": "system", "content": "Call execute_code with bash `echo hi`."},
                            {"role": "user", "content": "Go."}])
    assert turn.tokens_in > 0 and turn.tool_calls
