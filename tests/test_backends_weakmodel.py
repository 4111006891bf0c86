"""A weak open-weight model's reply shapes (seen with a real 0.5B model): the echo, stage-named fenced
pseudo-calls with Python triple quotes, an XML plan. Each gets a corrective message naming what was wrong
with one valid call to copy; a model that follows it gets to run its tools. Also: a prompt that cannot fit
the declared context is refused before the run, and context retries are recorded when they end it."""

from __future__ import annotations

import json
import time

import pytest
from automedbench.agent import TOOLS, Agent
from automedbench.api import hookimpl
from automedbench.cli import main
from automedbench.conversation import AgentLoop
from automedbench.records import AgentTurn, Result, ToolCall
from automedbench.serialize import read_json
from automedbench.testing import needs
from automedbench.trajectory import read_events
from automedbench_models.replyhint import MAX_SCAN, diagnose, example_call
from automedbench_models.textcalls import find_text_calls
from click.testing import CliRunner
from test_backends_fakes import ReferenceModel, Reply, openai_reply, serve_fake_llm

KEY_ENV = "AMB_TEST_WEAK_KEY"
fake_llm = pytest.fixture(serve_fake_llm, name="fake_llm")
BRIEF = ("# Task: segment the kidney and its tumour in each CT volume\n\nInput data (read-only): `/data/public`. "
         "Write one organ.nii.gz and one lesion.nii.gz per case under outputs/<case>/. Plan first in plan/plan.md.")
PSEUDO_CALL = ('I will plan.\n```json\n{"name": "S1_Plan", "arguments": {"code": """\nprint(\'plan\')\n"""}}\n```')
STAGE_CALL = '```json\n{"name": "Setup", "arguments": {"language": "python", "code": "print(1)"}}\n```'
XML_PLAN = "<plan>\n  <step>Load the CT volumes</step>\n  <step>Segment</step>\n</plan>"


# ------------------------------------------------------------------ the diagnosis, shape by shape


def test_stage_named_fenced_call_with_triple_quotes_is_invalid_json_with_the_parser_error():
    hint = diagnose(PSEUDO_CALL, TOOLS, prompt=BRIEF, data_dir="/data/public")
    assert hint.kind == "invalid_json"
    assert "line 1 column" in hint.detail and "Expecting" in hint.detail  # json's own wording and position
    assert "triple quotes" in hint.message


def test_valid_json_named_after_a_stage_is_an_unknown_tool():
    hint = diagnose(STAGE_CALL, TOOLS, prompt=BRIEF)
    assert hint.kind == "unknown_tool" and "'Setup' is not a tool" in hint.detail
    assert "execute_code" in hint.detail and "submit_results" in hint.detail


@pytest.mark.parametrize(("arguments", "problem"), [
    ({"language": "rust", "code": "x"}, "must be one of python, bash"),
    ({"language": "python"}, "missing required argument 'code'"),
    ({"language": "python", "code": 3}, "'code' must be a string"),
    ([1, 2], "must be a JSON object"),
])
def test_a_known_tool_with_arguments_that_fail_the_schema(arguments, problem):
    text = "```json\n" + json.dumps({"name": "execute_code", "arguments": arguments}) + "\n```"
    hint = diagnose(text, TOOLS)
    assert hint.kind == "bad_arguments" and problem in hint.detail


def test_echo_xml_plan_prose_and_empty():
    assert diagnose(BRIEF[:300] + " and so on", TOOLS, prompt=BRIEF).kind == "echo"
    assert diagnose(XML_PLAN, TOOLS, prompt=BRIEF).kind == "xml_plan"
    assert diagnose("I will now look at the data carefully.", TOOLS, prompt=BRIEF).kind == "no_call"
    assert diagnose("", TOOLS).kind == "no_call"
    # an ordinary code block is not a call attempt
    assert diagnose("```python\nprint(1)\n```", TOOLS).kind == "no_call"


def test_every_message_carries_one_valid_call_that_text_recovery_accepts():
    for text in (PSEUDO_CALL, STAGE_CALL, XML_PLAN, BRIEF, "prose", ""):
        message = diagnose(text, TOOLS, prompt=BRIEF, data_dir="/data/public").message
        (call,) = find_text_calls(message)
        args = json.loads(call.arguments)
        assert call.name == "execute_code" and args["language"] == "python" and "/data/public" in args["code"]
    assert json.loads(example_call(TOOLS).split("\n")[1])["name"] == "execute_code"


def test_huge_and_hostile_replies_are_scanned_bounded():
    fences = "```json\n{\"name\": \"x\", \"arguments\": {\n" * 50_000  # unclosed fences, 2 MB
    hint = diagnose(fences + "\x00\u2028\ud800", TOOLS, prompt=BRIEF)
    assert hint.kind in ("no_call", "invalid_json") and len(hint.message) < 2000
    deep = "```json\n" + "[" * (MAX_SCAN // 2) + "\n```"
    assert diagnose(deep, TOOLS).kind in ("invalid_json", "no_call")


def test_the_time_limit_can_exclude_model_time():
    loop = AgentLoop(None, None, None, None, {}, [], 10, 5.0, 5.0, 3, started=time.monotonic() - 10,
                     count_model_time=False, model_s=8.0)
    assert 1.9 < loop.elapsed() < 3.0  # ten seconds of wall time, eight of them waiting for the model
    loop.count_model_time = True
    assert loop.elapsed() >= 10


# ------------------------------------------------------------------ whole runs through the CLI


class WeakModel:
    """Echoes the brief, writes a stage-named fenced pseudo-call with triple quotes, then an XML plan; once
    a corrective message shows a valid call it copies it, then writes the reference solution's calls as
    fenced JSON (the shape the corrective message taught). `follows=False`: never learns."""

    def __init__(self, reg, follows: bool = True) -> None:
        self.inner = ReferenceModel(reg, "segmentation/demo", "lite", "openai")
        self.follows = follows
        self.shapes = ["echo", PSEUDO_CALL, XML_PLAN]
        self.learned = False

    def __call__(self, request: dict) -> Reply:
        messages = request["body"]["messages"]
        last = messages[-1]
        if self.shapes:
            shape = self.shapes.pop(0)
            return openai_reply(messages[0]["content"][:400] if shape == "echo" else shape)
        if not self.follows:
            return openai_reply(XML_PLAN)
        if not self.learned and last["role"] == "user" and "```json" in (last.get("content") or ""):
            self.learned = True
            example = last["content"][last["content"].index("```json"):]
            return openai_reply("Understood.\n" + example)
        reply = self.inner(request)
        message = reply.body["choices"][0]["message"]
        written = ["```json\n" + json.dumps({"name": c["function"]["name"],
                                            "arguments": json.loads(c["function"]["arguments"] or "{}")}) + "\n```"
                   for c in message.pop("tool_calls", [])]
        message["content"] = "\n".join([message["content"] or "", *written])
        reply.body["choices"][0]["finish_reason"] = "stop"
        return reply


def run_cli(fake_llm, tmp_path, data_root, *options: str, expect: int = 0):
    out = tmp_path / "runs"
    args = ["run", "--task", "segmentation/demo", "--agent", "openai", "--out", str(out), "--data-root",
            str(data_root), "--quiet"]
    for opt in ("model=local-model", f"base_url={fake_llm.url}/v1", f"api_key_env={KEY_ENV}", "timeout_s=20",
                *options):
        args += ["--agent-option", opt]
    cli = CliRunner().invoke(main, args)
    assert cli.exit_code == expect, cli.output
    if expect:
        return cli, out
    (run_dir,) = out.iterdir()
    return read_json(run_dir / "result.json", Result), read_events(run_dir / "trajectory.jsonl")


@pytest.mark.slow  # a whole demo run
@needs("openai")
def test_a_weak_model_that_follows_the_corrective_message_runs_its_tools(fake_llm, monkeypatch, tmp_path,
                                                                          data_root, reg):
    monkeypatch.setenv(KEY_ENV, "sk-fake")
    fake_llm.fallback = WeakModel(reg)
    result, events = run_cli(fake_llm, tmp_path, data_root, "text_tool_calls=true", "continues=3")
    nudges = [e for e in events if e["type"] == "no_tool_call"]
    assert [e["hint"] for e in nudges] == ["echo", "invalid_json", "xml_plan"]
    assert "Expecting" in nudges[1]["detail"] and "triple quotes" in nudges[1]["message"]
    # what the model was sent after each near miss is that message, not a generic sentence
    sent = [r["body"]["messages"][-1]["content"] for r in fake_llm.requests[1:4]]
    assert sent == [e["message"] for e in nudges]
    tools = [e for e in events if e["type"] == "tool" and e["name"] == "execute_code"]
    assert tools and tools[0]["exit_code"] == 0 and "listdir" in tools[0]["code"]
    assert result.state == "scored" and result.end_reason == "submitted"
    assert result.runtime.text_replies == 3 and result.task.strict > 0


@needs("openai")
def test_a_weak_model_that_never_follows_ends_cleanly_with_the_reason(fake_llm, monkeypatch, tmp_path,
                                                                       data_root, reg):
    monkeypatch.setenv(KEY_ENV, "sk-fake")
    fake_llm.fallback = WeakModel(reg, follows=False)
    result, events = run_cli(fake_llm, tmp_path, data_root, "text_tool_calls=true", "continues=3")
    assert result.state == "scored" and result.end_reason == "no_tool_call"
    stop = [e for e in events if e["type"] == "no_tool_call"][-1]
    assert stop["action"] == "stop" and stop["hint"] == "xml_plan"


# what a real 0.5B model wrote on every turn of a VQA demo run
TRIPLE_QUOTED_CALL = ('```json\n{\n  "name": "execute_code",\n  "arguments": {\n    "language": "python",\n'
                      '    "code": """\nimport os; print(sorted(os.listdir(\\"/data/public\\"))[:20])\n"""\n'
                      '  }\n}\n```')


@needs("openai")
def test_a_call_to_a_tool_with_its_code_in_triple_quotes_runs(fake_llm, monkeypatch, tmp_path, data_root):
    """The real model never took the corrective message (four turns, no call ran): a fenced call to an offered
    tool whose code is a Python triple-quoted string now runs as that code."""
    monkeypatch.setenv(KEY_ENV, "sk-fake")
    replies = [TRIPLE_QUOTED_CALL, '```json\n{"name": "submit_results", "arguments": {}}\n```']
    fake_llm.fallback = lambda request: openai_reply(replies.pop(0) if replies else "done")
    result, events = run_cli(fake_llm, tmp_path, data_root, "text_tool_calls=true", "continues=1")
    ran = [e for e in events if e["type"] == "tool" and e["name"] == "execute_code"]
    assert len(ran) == 1 and ran[0]["exit_code"] == 0, ran
    assert ran[0]["code"] == '\nimport os; print(sorted(os.listdir("/data/public"))[:20])\n'
    assert not [e for e in events if e["type"] == "no_tool_call"]
    assert result.end_reason == "submitted" and result.runtime.recovered_calls == 2


@needs("openai")
def test_a_prompt_that_cannot_fit_the_declared_context_is_a_user_error_before_the_run(fake_llm, monkeypatch,
                                                                                     tmp_path, data_root):
    monkeypatch.setenv(KEY_ENV, "sk-fake")
    cli, out = run_cli(fake_llm, tmp_path, data_root, "context_window=1024", "max_tokens=512", expect=2)
    line = cli.output.strip().splitlines()[-1]
    assert "context_window is 1024" in line and "max_tokens 512" in line and "tokens" in line
    assert fake_llm.requests == []  # nothing was sent
    assert not out.exists() or not any(out.iterdir())  # and no half-made run folder is left


@needs("openai")
def test_context_retries_that_end_the_run_are_recorded(fake_llm, monkeypatch, tmp_path, data_root):
    monkeypatch.setenv(KEY_ENV, "sk-fake")
    refusal = Reply(400, {"error": {"code": 400, "message": "the request exceeds the available context size",
                                    "type": "exceed_context_size_error", "n_ctx": 2048}})
    fake_llm.fallback = lambda request: refusal
    result, events = run_cli(fake_llm, tmp_path, data_root, "overflow_retries=2")
    assert result.state == "agent_failure" and "context size" in (result.error or "")
    overflow = [e for e in events if e["type"] == "context_overflow"]
    assert len(overflow) == 3 == result.runtime.context_retries == len(fake_llm.requests)
    assert [e["final"] for e in overflow] == [False, False, True]


# ------------------------------------------------------------------ without automedbench-models


class TalksFirst(Agent):
    """Replies with prose once (no tool call), then submits: the runner answers the prose with a hint."""

    name = "talks-first"

    def next_turn(self, messages):
        if not any(m["role"] == "assistant" for m in messages):
            return AgentTurn("I will look at the data first.")
        return AgentTurn(tool_calls=[ToolCall("c1", "submit_results", "{}")])


class BrokenHints:
    """A reply-hint plugin with a bug: it raises on whatever the agent wrote."""

    @hookimpl
    def automedbench_reply_hint(self, reply, tools, prompt, data_dir):
        raise ValueError(f"cannot read {reply[:10]!r}")


@pytest.mark.parametrize("with_models", [True, False, "broken"])
def test_a_reply_without_a_call_is_answered_with_or_without_the_hint_plugin(tmp_path, with_models):
    """The runner asks `automedbench_reply_hint` on every reply without a tool call; without automedbench-models
    the core answers with its generic message and one valid call, and the event keeps its fields. A hint
    plugin that raises on the agent's text gets the same generic answer: the run stays scored."""
    from automedbench.runner import Run, RunOptions
    from automedbench.testing import fresh_registry, register_agent, register_toy_track

    register_toy_track()
    reg = fresh_registry()
    if with_models is not True:
        reg.pm.unregister(name="models")
    if with_models == "broken":
        reg.pm.register(BrokenHints(), name="broken-hints")
    assert bool(reg.pm.hook.automedbench_reply_hint.get_hookimpls()) is bool(with_models)
    register_agent(TalksFirst, reg)
    run = Run(RunOptions("toy/vowels", "lite", "talks-first", out=tmp_path / "runs", data_root=tmp_path / "data",
                         judge="rules"), reg)
    result = run.execute()
    assert result.state == "scored", result.error
    (event,) = [e for e in read_events(run.run_dir / "trajectory.jsonl") if e["type"] == "no_tool_call"]
    assert event["action"] == "continue" and event["hint"] == ("no_call" if with_models is True else "none")
    assert ("reply-hint plugin failed: ValueError" in event["detail"]) is (with_models == "broken")
    assert {"turn", "text_replies", "continues", "detail", "message"} <= set(event)
    (call,) = find_text_calls(event["message"])
    assert call.name == "execute_code" and json.loads(call.arguments)["language"] == "python"
