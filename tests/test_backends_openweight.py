"""Open-weight model behaviour against the loopback fake server: prose turns, tool calls written as text,
small-context refusals. Both wire formats; the runs go through the real runner and CLI."""

from __future__ import annotations

import json

import pytest
from automedbench.agent import TOOLS, AgentContext
from automedbench.cli import main
from automedbench.errors import AgentError, UserError
from automedbench.records import Result
from automedbench.serialize import read_json
from automedbench.testing import needs
from automedbench.trajectory import read_events
from automedbench_models.chat_common import ELIDED, context_overflow
from automedbench_models.openai_chat import OpenAIChatAgent
from automedbench_models.textcalls import MAX_CALLS, MAX_DEPTH, MAX_OBJECT, find_text_calls
from click.testing import CliRunner
from test_backends_fakes import ReferenceModel, Reply, anthropic_reply, openai_reply, serve_fake_llm

pytestmark = needs("openai", "anthropic")
KEY_ENV = "AMB_TEST_OPENWEIGHT_KEY"
fake_llm = pytest.fixture(serve_fake_llm, name="fake_llm")
MESSAGES = [{"role": "system", "content": "brief"}, {"role": "user", "content": "Begin."}]


# ------------------------------------------------------------------ parsing tool calls out of text


def calls(text: str) -> list[tuple[str, dict, str]]:
    return [(c.name, json.loads(c.arguments), c.source) for c in find_text_calls(text)]


def test_hermes_qwen_tags_one_or_several_and_an_unclosed_last_one():
    text = ('I will look.\n<tool_call>\n{"name": "execute_code", "arguments": {"language": "bash", "code": "ls"}}\n'
            '</tool_call>\n<tool_call>{"name": "submit_results", "arguments": {}}')
    assert calls(text) == [("execute_code", {"language": "bash", "code": "ls"}, "hermes"),
                           ("submit_results", {}, "hermes")]
    # a list inside one tag, and arguments sent JSON-encoded as the wire format does
    listed = ('<tool_call>[{"name": "a", "arguments": "{\\"x\\": 1}"}, {"name": "b", "parameters": {"y": 2}}]'
              '</tool_call>')
    assert calls(listed) == [("a", {"x": 1}, "hermes"), ("b", {"y": 2}, "hermes")]


def test_llama3_python_tag_json_several_and_raw_python():
    one = ('<|python_tag|>{"name": "execute_code", "parameters": {"language": "python", "code": "a = 1; b = 2"}}'
           "<|eom_id|>")
    assert calls(one) == [("execute_code", {"language": "python", "code": "a = 1; b = 2"}, "python_tag")]
    two = '<|python_tag|>{"name": "a", "parameters": {}}; {"name": "b", "parameters": {"k": "v"}}'
    assert calls(two) == [("a", {}, "python_tag"), ("b", {"k": "v"}, "python_tag")]
    raw = "<|python_tag|>import os\nprint(os.listdir('.'))<|eot_id|>"
    assert calls(raw) == [("execute_code", {"language": "python", "code": "import os\nprint(os.listdir('.'))"},
                           "python_tag")]


def test_fenced_json_objects_with_name_and_arguments_only():
    text = ("Plan:\n```json\n{\"name\": \"execute_code\", \"arguments\": {\"language\": \"bash\", \"code\": \"pwd\"}}"
            "\n```\nand a config:\n```json\n{\"threshold\": 0.5}\n```\n```python\nprint(1)\n```")
    assert calls(text) == [("execute_code", {"language": "bash", "code": "pwd"}, "fenced_json")]


def test_triple_quoted_code_is_repaired_for_an_offered_tool_only():
    """Python triple quotes (both kinds, escapes read as Python reads them) in a fenced call to an offered tool;
    without the tool names, or for a name not offered (a stage), nothing is recovered: the hint explains."""
    tools = frozenset({"execute_code", "submit_results"})
    double = '{"name": "execute_code", "arguments": {"language": "python", "code": """\nprint(\\"a\\")\n"""}}'
    single = "{\"name\": \"execute_code\", \"arguments\": {\"language\": \"bash\", \"code\": '''ls\\tx'''}}"
    text = f"```json\n{double}\n```\nthen\n```json\n{single}\n```"
    assert [(c.name, json.loads(c.arguments)["code"], c.source) for c in find_text_calls(text, tools)] == [
        ("execute_code", '\nprint("a")\n', "fenced_json_triple_quotes"),
        ("execute_code", "ls\tx", "fenced_json_triple_quotes")]
    assert find_text_calls(text) == []
    stage = '```json\n{"name": "S1_Plan", "arguments": {"code": """\nprint(1)\n"""}}\n```'
    assert find_text_calls(stage, tools) == []
    # a valid JSON call keeps its own source: the repair only runs on what JSON refused
    plain = '```json\n{"name": "execute_code", "arguments": {"language": "bash", "code": "echo \\"\\"\\""}}\n```'
    assert [(c.source, json.loads(c.arguments)["code"]) for c in find_text_calls(plain, tools)] == [
        ("fenced_json", 'echo """')]


@pytest.mark.parametrize("text", [
    "I will now list the files with ls.",  # prose
    "<tool_call>{not json}</tool_call>",
    '<tool_call>{"name": "", "arguments": {}}</tool_call>',  # empty name
    '<tool_call>{"name": "x", "arguments": [1, 2]}</tool_call>',  # arguments not an object
    '```json\n{"name": "x", "arguments": "[1]"}\n```',
    "<tool_call>" + '{"name": "x", "arguments": {"a": ' * (MAX_DEPTH + 2) + "1" + "}" * (MAX_DEPTH + 3)
    + "</tool_call>",  # too deep
    '<tool_call>{"name": "x", "arguments": {"code": "' + "a" * MAX_OBJECT + '"}}</tool_call>',  # too long
])
def test_text_that_is_not_a_valid_call_yields_none(text):
    assert find_text_calls(text) == []


def test_at_most_max_calls_per_reply():
    text = '<tool_call>{"name": "submit_results", "arguments": {}}</tool_call>' * (MAX_CALLS + 5)
    assert len(find_text_calls(text)) == MAX_CALLS


# ------------------------------------------------------------------ context-overflow refusals


class StatusError(Exception):
    def __init__(self, status: int, message: str, body=None) -> None:
        super().__init__(message)
        self.status_code, self.message, self.body = status, message, body


@pytest.mark.parametrize(("status", "message", "body", "limit"), [
    (400, "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
     {"code": "context_length_exceeded"}, 8192),  # OpenAI, vLLM, llama-cpp-python
    (400, "the request exceeds the available context size, try increasing it",
     {"error": {"type": "exceed_context_size_error", "n_prompt_tokens": 5000, "n_ctx": 4096}}, 4096),  # llama.cpp
    (400, "input length exceeds the context length", None, None),  # Ollama
    (400, "prompt is too long: 210000 tokens > 200000 maximum", None, 200000),  # Anthropic
    (413, "Input validation error: too many tokens", None, None),  # gateways / TGI
])
def test_context_overflow_variants_are_recognised(status, message, body, limit):
    found = context_overflow(StatusError(status, message, body))
    assert found is not None and found.limit == limit


@pytest.mark.parametrize(("status", "message"), [
    (400, "Invalid schema for function 'execute_code'"), (429, "maximum context length is 8192 tokens"),
    (500, "prompt is too long")])
def test_other_errors_are_not_overflows(status, message):
    assert context_overflow(StatusError(status, message)) is None


@pytest.fixture
def agent_for(fake_llm, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-fake")
    made = []

    def make(**options):
        agent = OpenAIChatAgent(model="local-model", base_url=fake_llm.url + "/v1", api_key_env=KEY_ENV,
                                timeout_s="10", **options)
        agent.start(AgentContext(None, "lite", "brief", "Begin.", TOOLS, "/data", "/ws"))
        agent.backend.sleep = lambda s: None
        made.append(agent)
        return agent

    yield make
    for agent in made:
        agent.close()


def overflow_reply(n_ctx: int) -> Reply:
    """llama.cpp's server refusing a prompt longer than its context."""
    return Reply(400, {"error": {"code": 400, "message": "the request exceeds the available context size, try "
                                 "increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 9999,
                                 "n_ctx": n_ctx}})


def history(turns: int, size: int) -> list[dict]:
    out = list(MESSAGES)
    for i in range(turns):
        out.append({"role": "assistant", "content": f"step {i}", "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "execute_code", "arguments": "{}"}}]})
        out.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"output {i} " + "x" * size})
    return out


def test_overflow_is_answered_by_a_smaller_context_and_a_retry(agent_for, fake_llm):
    fake_llm.push(overflow_reply(4096), openai_reply("ok", [("c9", "submit_results", "{}")]),
                  openai_reply("ok", [("c10", "submit_results", "{}")]))
    agent = agent_for(max_tokens="512", keep_turns="4")
    messages = history(8, 4000)  # ~8,000 tokens: fits the configured 128k window, not the server's 4096
    turn = agent.next_turn(messages)
    assert [c.name for c in turn.tool_calls] == ["submit_results"]
    first, second = (r["body"]["messages"] for r in fake_llm.requests)
    assert first == messages
    tools = [m["content"] for m in second if m["role"] == "tool"]
    assert ELIDED in tools and len(json.dumps(second)) < 4096 * 4  # trimmed below the server's context
    assert second[-1]["content"].startswith("output 7")  # the latest output is kept whole
    events = agent.drain_events()
    overflow = next(e for e in events if e["type"] == "context_overflow")
    assert overflow["limit"] == 4096 and overflow["context_window"] == 4096 and overflow["max_tokens"] == 512
    assert "exceeds the available context" in overflow["error"]
    # the learned window holds for later turns: no second refusal, trimmed from the start
    agent.next_turn(messages)
    assert len(fake_llm.requests) == 3 and len(json.dumps(fake_llm.requests[2]["body"]["messages"])) < 4096 * 4


def test_overflow_retries_are_bounded_then_an_agent_error(agent_for, fake_llm):
    fake_llm.push(*[overflow_reply(100_000) for _ in range(3)])
    agent = agent_for(overflow_retries="2")
    with pytest.raises(AgentError, match="context size"):
        agent.next_turn(history(3, 100))
    assert len(fake_llm.requests) == 3


def test_options_are_checked(agent_for):
    with pytest.raises(UserError, match="text_tool_calls"):
        agent_for(text_tool_calls="maybe")
    with pytest.raises(UserError, match="continues must be between"):
        agent_for(continues="-1")
    assert agent_for(continues="0", text_tool_calls="yes").continues == 0


# ------------------------------------------------------------------ whole runs through the CLI


class TextModel:
    """The reference solution as an open-weight model without a tool parser would send it: first a prose
    turn, then every call written in the reply text in `style`. Optionally refuses prompts over `n_ctx`."""

    def __init__(self, reg, wire: str, style: str, *, n_ctx: int | None = None, prose_turns: int = 1) -> None:
        self.inner = ReferenceModel(reg, "segmentation/demo", "lite", wire)
        self.wire, self.style, self.n_ctx, self.prose = wire, style, n_ctx, prose_turns
        self.refused = 0

    def render(self, name: str, args: dict) -> str:
        if self.style == "hermes":
            return f"<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>"
        if self.style == "python_tag":
            return f"<|python_tag|>{json.dumps({'name': name, 'parameters': args})}<|eom_id|>"
        return f"```json\n{json.dumps({'name': name, 'arguments': args}, indent=1)}\n```"

    def __call__(self, request: dict) -> Reply:
        body = request["body"]
        if self.n_ctx and len(json.dumps(body.get("messages"))) // 4 > self.n_ctx - body.get("max_tokens", 0):
            self.refused += 1
            return overflow_reply(self.n_ctx)
        if self.prose:
            self.prose -= 1
            text = "I will first inspect the data, then run the model on each case."
            return anthropic_reply(text) if self.wire == "anthropic" else openai_reply(text)
        reply = self.inner(request)
        if self.wire == "anthropic":
            blocks = reply.body["content"]
            uses = [b for b in blocks if b["type"] == "tool_use"]
            text = "\n".join([b["text"] for b in blocks if b["type"] == "text"] +
                             [self.render(u["name"], u["input"]) for u in uses])
            return anthropic_reply(text)
        message = reply.body["choices"][0]["message"]
        written = [self.render(c["function"]["name"], json.loads(c["function"]["arguments"] or "{}"))
                   for c in message.pop("tool_calls", [])]
        message["content"] = "\n".join([message["content"] or "", *written])
        reply.body["choices"][0]["finish_reason"] = "stop"
        return reply


def run_cli(fake_llm, tmp_path, data_root, wire: str, *options: str) -> tuple[Result, list[dict], str]:
    out = tmp_path / "runs"
    args = ["run", "--task", "segmentation/demo", "--agent", wire, "--out", str(out), "--data-root", str(data_root),
            "--quiet"]
    for opt in ("model=local-model", f"base_url={fake_llm.url}" + ("/v1" if wire == "openai" else ""),
                f"api_key_env={KEY_ENV}", "timeout_s=20", *options):
        args += ["--agent-option", opt]
    cli = CliRunner().invoke(main, args)
    assert cli.exit_code == 0, cli.output
    (run_dir,) = out.iterdir()
    return read_json(run_dir / "result.json", Result), read_events(run_dir / "trajectory.jsonl"), cli.output


@pytest.mark.slow  # a whole demo run per dialect
@pytest.mark.parametrize(("wire", "style"), [("openai", "hermes"), ("anthropic", "fenced"),
                                             ("openai", "python_tag")])
def test_prose_then_calls_written_as_text_score_like_the_reference(fake_llm, monkeypatch, tmp_path, reg,
                                                                   data_root, run_agent, wire, style):
    monkeypatch.setenv(KEY_ENV, "sk-fake")
    fake_llm.fallback = model = TextModel(reg, wire, style)
    result, events, _ = run_cli(fake_llm, tmp_path, data_root, wire, "text_tool_calls=true")
    reference, _ = run_agent("reference")
    steps = len(model.inner.steps)
    assert result.state == "scored" and result.end_reason == "submitted"
    assert result.aggregate.overall == reference.aggregate.overall
    assert result.task.strict == reference.task.strict and result.task.strict > 0
    assert (result.runtime.turns, result.runtime.text_replies, result.runtime.recovered_calls) == (steps + 1, 1, steps)
    nudge = [{k: v for k, v in e.items() if k != "t"} for e in events if e["type"] == "no_tool_call"]
    (hint,) = nudge
    assert {k: hint[k] for k in ("turn", "action", "text_replies", "continues", "hint")} == {
        "turn": 1, "action": "continue", "text_replies": 1, "continues": 3, "hint": "no_call"}
    recovered = [c for e in events if e["type"] == "assistant" for c in e["tool_calls"]]
    expected = {"hermes": "text:hermes", "fenced": "text:fenced_json", "python_tag": "text:python_tag"}[style]
    assert len(recovered) == steps and {c["source"] for c in recovered} == {expected}
    assert all(e.get("exit_code") == 0 for e in events if e["type"] == "tool" and e["name"] == "execute_code")
    sent = fake_llm.requests[1]["body"]["messages"]
    assert sent[-1] == {"role": "user", "content": hint["message"] if wire == "openai" else [
        {"type": "text", "text": hint["message"]}]}


def test_without_recovery_text_calls_are_prose_and_the_run_ends_after_the_continues(fake_llm, monkeypatch,
                                                                                    tmp_path, data_root, reg):
    monkeypatch.setenv(KEY_ENV, "sk-fake")
    fake_llm.fallback = TextModel(reg, "openai", "hermes")
    result, events, _ = run_cli(fake_llm, tmp_path, data_root, "openai", "continues=2")
    assert result.state == "scored" and result.end_reason == "no_tool_call"
    assert (result.runtime.turns, result.runtime.text_replies, result.runtime.tool_calls) == (3, 3, 0)
    assert [(e["turn"], e["action"]) for e in events if e["type"] == "no_tool_call"] == [
        (1, "continue"), (2, "continue"), (3, "stop")]
    assert events[-1]["type"] == "end" and events[-1]["reason"] == "no_tool_call"


@pytest.mark.slow  # a whole demo run against a scripted server
def test_small_context_server_mid_run_is_trimmed_and_retried_not_a_failure(fake_llm, monkeypatch, tmp_path,
                                                                        data_root, reg, run_agent):
    monkeypatch.setenv(KEY_ENV, "sk-fake")
    probe = TextModel(reg, "openai", "hermes", prose_turns=0)
    fake_llm.fallback = probe
    first, *_ = run_cli(fake_llm, tmp_path / "probe", data_root, "openai", "text_tool_calls=true",
                        "max_tokens=256")
    sizes = [len(json.dumps(r["body"]["messages"])) // 4 for r in fake_llm.requests]
    # a server whose context holds the brief and a few turns, but not the whole run
    n_ctx = sizes[0] + 256 + (sizes[-1] - sizes[0]) // 2
    assert n_ctx - 256 - 1024 > sizes[0]  # the kept part (brief + latest turns) fits after trimming
    fake_llm.requests.clear()
    fake_llm.fallback = model = TextModel(reg, "openai", "hermes", n_ctx=n_ctx, prose_turns=0)
    result, events, _ = run_cli(fake_llm, tmp_path / "small", data_root, "openai", "text_tool_calls=true",
                                "max_tokens=256")
    assert model.refused >= 1 and result.runtime.context_retries == model.refused
    assert result.state == "scored" and result.end_reason == "submitted"
    assert result.aggregate.overall == first.aggregate.overall == run_agent("reference")[0].aggregate.overall
    overflow = [e for e in events if e["type"] == "context_overflow"]
    assert len(overflow) == model.refused and overflow[0]["limit"] == n_ctx
    assert any(e["type"] == "context_trimmed" for e in events)
