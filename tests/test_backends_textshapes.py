"""Tool calls written in a reply's text the way open-weight models write them without a tool parser, beyond
the clean shapes: code over several lines inside a JSON string (raw line breaks, invalid JSON), trailing
commas, and a call written bare after a sentence instead of in a fence. Structured calls got these repairs;
text calls did not, so such a reply ran nothing and the model was told its JSON was invalid."""

from __future__ import annotations

import json
import time

import pytest
from automedbench.agent import TOOLS
from automedbench_models.replyhint import diagnose
from automedbench_models.textcalls import MAX_CALLS, MAX_TEXT, find_text_calls
from test_backends_fakes import Reply, openai_reply, serve_fake_llm
from test_backends_openweight import KEY_ENV, TextModel, run_cli

fake_llm = pytest.fixture(serve_fake_llm, name="fake_llm")
OFFERED = frozenset({"execute_code", "submit_results"})


def multiline_json(name: str, args: dict) -> str:
    """A call as a small model writes it: each string's lines escaped as JSON, real line breaks between them
    (so not valid JSON), keys indented, a trailing comma after the last argument."""
    parts = []
    for key, value in args.items():
        text = "\n".join(json.dumps(line)[1:-1] for line in value.split("\n")) if isinstance(value, str) else None
        parts.append(f'    "{key}": ' + (f'"{text}"' if text is not None else json.dumps(value)))
    body = ",\n".join(parts) + ("," if parts else "")
    return f'{{\n  "name": "{name}",\n  "arguments": {{\n{body}\n  }}\n}}'


def found(text: str, tools: frozenset[str] = OFFERED) -> list[tuple[str, dict, str]]:
    return [(c.name, json.loads(c.arguments), c.source) for c in find_text_calls(text, tools)]


CODE = 'import os\nfor name in sorted(os.listdir("/data/public")):\n\tprint(name, "a\\nb")'


def test_a_multiline_string_and_a_trailing_comma_are_repaired_in_every_text_format():
    raw = multiline_json("execute_code", {"language": "python", "code": CODE})
    with pytest.raises(json.JSONDecodeError):
        json.loads(raw)
    expected = ("execute_code", {"language": "python", "code": CODE})
    assert found(f"```json\n{raw}\n```") == [(*expected, "fenced_json")]
    assert found(f"<tool_call>\n{raw}\n</tool_call>") == [(*expected, "hermes")]
    assert found(f"<|python_tag|>{raw.replace('arguments', 'parameters')}<|eom_id|>") == [(*expected, "python_tag")]
    # the repair needs no tool names (as for structured calls); the bare form below does
    assert [c.name for c in find_text_calls(f"```json\n{raw}\n```")] == ["execute_code"]


def test_a_bare_call_after_a_sentence_is_taken_for_an_offered_tool_only():
    raw = multiline_json("execute_code", {"language": "bash", "code": "ls -la\npwd"})
    args = {"language": "bash", "code": "ls -la\npwd"}
    assert found(f"Let me look at the data first.\n{raw}\nThen I will plan.") == [("execute_code", args, "bare_json")]
    assert found(raw) == [("execute_code", args, "bare_json")]
    as_string = json.dumps({"name": "execute_code", "arguments": json.dumps(args)})  # arguments JSON-encoded
    assert found("Calling:\n" + as_string) == [("execute_code", args, "bare_json")]
    submit = '{"name": "submit_results"}'  # no arguments at all
    assert found(f"All outputs are checked.\n  {submit}") == [("submit_results", {}, "bare_json")]
    assert found('[{"name": "execute_code", "arguments": {"language": "bash", "code": "ls"}}, ' + submit + "]") == [
        ("execute_code", {"language": "bash", "code": "ls"}, "bare_json"), ("submit_results", {}, "bare_json")]
    # not taken: a stage name, no tool names given, JSON inside a sentence, a dict inside a code block, a schema
    assert found('{"name": "S1_Plan", "arguments": {"code": "x"}}') == []
    assert found(raw, frozenset()) == []
    assert found('I would call {"name": "execute_code", "arguments": {"language": "bash", "code": "ls"}} now') == []
    assert found('```python\ncall = (\n{"name": "execute_code", "arguments": {"language": "bash", "code": "ls"}}'
                 '\n)\n```') == []
    assert found('```\nunclosed\n{"name": "execute_code", "arguments": {"language": "bash", "code": "ls"}}') == []


def test_a_fenced_call_wins_over_bare_objects_after_it():
    """What the real 0.5B model wrote on a report-generation demo: the corrective message's call in a fence,
    then the same call with its arguments JSON-encoded and a submit, bare. Only the fenced call is run."""
    listing = {"language": "python", "code": 'import os; print(sorted(os.listdir("/data/public"))[:20])'}
    text = ("```json\n" + json.dumps({"name": "execute_code", "arguments": listing}) + "\n```\n"
            + json.dumps({"name": "execute_code", "arguments": json.dumps(listing)}) + "\n\n"
            + '{"name": "submit_results", "arguments": {"output_dir": "/workspace/outputs"}}')
    assert found(text) == [("execute_code", listing, "fenced_json")]


def test_bare_objects_are_bounded():
    call = '{"name": "submit_results", "arguments": {}}\n'
    assert len(find_text_calls(call * (MAX_CALLS + 5), OFFERED)) == MAX_CALLS
    hostile = ("{\n" + '"' * 3 + "[" * 1000 + "\n") * (MAX_TEXT // 1000)  # never closes, many line starts
    started = time.process_time()
    assert find_text_calls(hostile, OFFERED) == []
    assert find_text_calls("{\n" * MAX_TEXT, OFFERED) == []
    assert time.process_time() - started < 2.0


def test_without_recovery_the_hint_names_the_raw_line_break():
    raw = multiline_json("execute_code", {"language": "python", "code": CODE})
    hint = diagnose(f"```json\n{raw}\n```", TOOLS)
    assert hint.kind == "invalid_json" and "Invalid control character" in hint.detail


# ------------------------------------------------------------------ whole runs through the CLI


class SloppyTextModel(TextModel):
    """The reference solution written as a small model writes calls in text: in turn, a fenced call with its
    code over several lines (raw line breaks, trailing comma), a sentence then the same shape bare, and a bare
    call whose arguments are JSON-encoded."""

    def __init__(self, reg, wire: str) -> None:
        super().__init__(reg, wire, "sloppy")
        self.count = 0

    def render(self, name: str, args: dict) -> str:
        self.count += 1
        shape = self.count % 3
        if shape == 1:
            return "```json\n" + multiline_json(name, args) + "\n```"
        if shape == 2:
            return "I will run this now:\n" + multiline_json(name, args)
        return json.dumps({"name": name, "arguments": json.dumps(args)})


@pytest.mark.slow  # a whole demo run per wire format
@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_calls_written_sloppily_in_text_score_like_the_reference(fake_llm, monkeypatch, tmp_path, reg, data_root,
                                                                 run_agent, wire):
    monkeypatch.setenv(KEY_ENV, "sk-fake")
    fake_llm.fallback = model = SloppyTextModel(reg, wire)
    result, events, _ = run_cli(fake_llm, tmp_path, data_root, wire, "text_tool_calls=true")
    reference, _ = run_agent("reference")
    steps = len(model.inner.steps)
    assert steps >= 3 and any("\n" in (s.code or "") for s in model.inner.steps)
    assert result.state == "scored" and result.end_reason == "submitted"
    assert result.aggregate.overall == reference.aggregate.overall and result.task.strict > 0
    assert (result.runtime.text_replies, result.runtime.recovered_calls) == (1, steps)
    sources = [c["source"] for e in events if e["type"] == "assistant" for c in e["tool_calls"]]
    assert sources == [("text:fenced_json", "text:bare_json", "text:bare_json")[i % 3] for i in range(steps)]
    ran = [e for e in events if e["type"] == "tool" and e["name"] == "execute_code"]
    assert ran and all(e["exit_code"] == 0 for e in ran)
    assert [e["code"] for e in ran] == [s.code for s in model.inner.steps if not s.submit]


def test_a_bare_call_that_is_not_a_valid_call_gets_the_hint_a_fenced_one_gets():
    assert diagnose('Here:\n{"name": "S1_Plan", "arguments": {}}', TOOLS).kind == "unknown_tool"
    hint = diagnose('{"name": "execute_code", "arguments": {"language": "rust", "code": "x"}}', TOOLS)
    assert hint.kind == "bad_arguments" and "must be one of python, bash" in hint.detail
    hint = diagnose('{"name": "execute_code", "arguments": {"code": """x"""}}', TOOLS)
    assert hint.kind == "invalid_json" and hint.detail.startswith("a JSON call outside a fence is not valid JSON")
    assert "triple quotes" in hint.message
    assert diagnose('Settings:\n{"threshold": 0.5}', TOOLS).kind == "no_call"  # an object, no call attempt


def test_bare_calls_through_the_cli_a_stage_name_is_told_then_the_repaired_call_runs(fake_llm, monkeypatch,
                                                                                    tmp_path, data_root):
    """No whole demo: a stage-named bare call (answered with the unknown-tool hint, not "no tool call"), then a
    bare call with its code over several lines, then a bare submit."""
    monkeypatch.setenv(KEY_ENV, "sk-fake")
    code = 'import os\nprint(sorted(os.listdir("/data/public")))'
    replies = ['I start with the plan.\n{"name": "S1_Plan", "arguments": {"step": "plan"}}',
               "Listing the data:\n" + multiline_json("execute_code", {"language": "python", "code": code}),
               '{"name": "submit_results", "arguments": {}}']
    fake_llm.fallback = lambda request: openai_reply(replies.pop(0) if replies else "done")
    result, events, _ = run_cli(fake_llm, tmp_path, data_root, "openai", "text_tool_calls=true", "continues=1")
    (nudge,) = [e for e in events if e["type"] == "no_tool_call"]
    assert nudge["hint"] == "unknown_tool" and "'S1_Plan' is not a tool" in nudge["detail"]
    (ran,) = [e for e in events if e["type"] == "tool" and e["name"] == "execute_code"]
    assert ran["code"] == code and ran["exit_code"] == 0 and "case" in ran["stdout"]
    assert result.end_reason == "submitted" and result.runtime.recovered_calls == 2


# ------------------------------------------------------------------ replies cut off at the output limit

LISTING = '```json\n{"name": "execute_code", "arguments": {"language": "python", "code": "print(123 * 2)"}}\n```'


def cut_reply(text: str) -> Reply:
    return openai_reply(text, finish_reason="length")


def test_a_text_call_before_the_output_limit_runs_and_the_reply_is_not_continued(fake_llm, monkeypatch, tmp_path,
                                                                                   data_root):
    """A small model writes its call, then rambles until max_tokens: the call was there, so the model is not
    told its reply was cut off before any tool call (it was told so, and the call was lost)."""
    monkeypatch.setenv(KEY_ENV, "sk-fake")
    fake_llm.push(cut_reply(LISTING + "\nNext I will explain every step in detail. First, the data" + " ..." * 200),
                  openai_reply('```json\n{"name": "submit_results", "arguments": {}}\n```'))
    result, events, _ = run_cli(fake_llm, tmp_path, data_root, "openai", "text_tool_calls=true", "continues=1")
    (ran,) = [e for e in events if e["type"] == "tool" and e["name"] == "execute_code"]
    assert ran["exit_code"] == 0 and ran["stdout"].strip() == "246"
    assert not any("cut off" in json.dumps(r["body"]["messages"][-1]) for r in fake_llm.requests)
    assert len(fake_llm.requests) == 2 and result.end_reason == "submitted"


def test_a_text_call_split_by_the_output_limit_is_read_from_the_continued_reply(fake_llm, monkeypatch, tmp_path,
                                                                                data_root):
    monkeypatch.setenv(KEY_ENV, "sk-fake")
    head, tail = LISTING[:60], LISTING[60:]
    fake_llm.push(cut_reply(head), openai_reply(tail),
                  openai_reply('```json\n{"name": "submit_results", "arguments": {}}\n```'))
    result, events, _ = run_cli(fake_llm, tmp_path, data_root, "openai", "text_tool_calls=true", "continues=1")
    assert "cut off" in json.dumps(fake_llm.requests[1]["body"]["messages"][-1])  # it was continued
    (ran,) = [e for e in events if e["type"] == "tool" and e["name"] == "execute_code"]
    assert ran["exit_code"] == 0 and ran["stdout"].strip() == "246"
    assert not [e for e in events if e["type"] == "no_tool_call"]
    assert result.end_reason == "submitted" and result.runtime.recovered_calls == 2


def test_a_tool_schema_echoed_back_is_not_a_call():
    """Small models echo the tool list; a flat schema (name, description, parameters) has the shape of a Llama-
    style call whose arguments are the schema: it ran as execute_code with arguments type/properties."""
    schema = {"name": "execute_code", "description": "Run code", "parameters": {
        "type": "object", "properties": {"language": {"type": "string"}, "code": {"type": "string"}},
        "required": ["language", "code"]}}
    for text in (json.dumps(schema), "```json\n" + json.dumps(schema, indent=2) + "\n```",
                 "<|python_tag|>" + json.dumps(schema)):
        assert found(text) == [], text
    # a call's own arguments named type/properties still count when written as `arguments`
    odd = {"name": "execute_code", "arguments": {"type": "object", "properties": {}, "language": "bash", "code": "ls"}}
    assert [c[0] for c in found(json.dumps(odd))] == ["execute_code"]


def test_an_echo_with_the_tool_list_in_an_xml_block_is_an_echo_not_invalid_json(fake_llm, monkeypatch, tmp_path,
                                                                                 data_root):
    """What the real model sent on the detection demo (anthropic wire): the prompt echoed with the tool list in an
    ```xml block; it was told "a fenced block is not valid JSON at line 1 column 1"."""
    monkeypatch.setenv(KEY_ENV, "sk-fake")
    tools = ('```xml\n<tools>\n{"type": "function", "function": {"name": "execute_code", "parameters": {}}}\n'
             '</tools>\n```')

    def echo(request: dict) -> Reply:
        brief = request["body"]["messages"][0]["content"]
        return openai_reply(brief[:1500] + "\n\n### Tools\n" + tools)

    fake_llm.push(echo, openai_reply('```json\n{"name": "submit_results", "arguments": {}}\n```'))
    result, events, _ = run_cli(fake_llm, tmp_path, data_root, "openai", "text_tool_calls=true", "continues=1")
    (nudge,) = [e for e in events if e["type"] == "no_tool_call"]
    assert nudge["hint"] == "echo", nudge["detail"]
    assert diagnose("```python\n{\"name\": \"x\", \"arguments\": 1}\n```", TOOLS).kind == "no_call"
    assert result.end_reason == "submitted"
