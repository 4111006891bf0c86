"""Transcript parsers of the six installed agent systems, on transcripts in each system's documented format.

The fixtures are written from each system's documentation of its machine-readable output (and checked against
what the real programs printed against the scripted model server): Claude Code and Qwen Code `stream-json`,
Codex `exec --json`, Gemini CLI `stream-json`, OpenHands headless `--json` events, mini-swe-agent's trajectory.
Each is also read cut short, with errors, and as garbage: a transcript is the agent's text, never a crash.
"""

from __future__ import annotations

import json
import random

import pytest
from automedbench_models.transcripts import MAX_TURNS, PARSERS, TEXT_CAP, cap, shell_text, tool_code


def jsonl(*items) -> str:
    return "\n".join(json.dumps(i) for i in items) + "\n"


CLAUDE = jsonl(
    {"type": "system", "subtype": "init", "model": "claude-sonnet-4-5", "tools": ["Bash", "Write"]},
    {"type": "assistant", "message": {"id": "msg_1", "role": "assistant", "content": [
        {"type": "thinking", "thinking": "Look at the data first."},
        {"type": "text", "text": "Listing the cases."},
        {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls /data/public"}}],
        "usage": {"input_tokens": 1200, "output_tokens": 40, "cache_read_input_tokens": 100}}},
    {"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "case_000\ncase_001", "is_error": False}]},
     "tool_use_result": {"stdout": "case_000\ncase_001", "stderr": "", "interrupted": False}},
    {"type": "assistant", "message": {"id": "msg_2", "role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_2", "name": "Write",
         "input": {"file_path": "/workspace/plan/plan.md", "content": "# Plan\n1. load"}}]}},
    {"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "File created"}]}]}},
    {"type": "assistant", "message": {"id": "msg_3", "role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_3", "name": "Bash", "input": {"command": "python3 run.py"}}]}},
    {"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_3", "content": "Exit code 2\nTraceback: boom",
         "is_error": True}]}},
    {"type": "assistant", "message": {"id": "msg_4", "role": "assistant", "content": [
        {"type": "text", "text": "Done."}]}},
    {"type": "result", "subtype": "success", "is_error": False, "num_turns": 4, "total_cost_usd": 0.0123,
     "usage": {"input_tokens": 4000, "output_tokens": 300, "cache_read_input_tokens": 500}},
)


def test_claude_stream_json_becomes_turns_with_commands_writes_and_exit_codes():
    out = PARSERS["claude-stream-json"](CLAUDE)
    assert out.problem == "" and out.turns == 4
    replies = [e for e in out.events if e["type"] == "assistant"]
    tools = [e for e in out.events if e["type"] == "tool"]
    assert [r["turn"] for r in replies] == [1, 2, 3, 4]
    assert replies[0]["content"] == "Listing the cases." and replies[0]["reasoning"] == "Look at the data first."
    assert replies[0]["tokens_in"] == 1200 and replies[0]["tool_calls"][0]["name"] == "execute_code"
    assert (tools[0]["code"], tools[0]["exit_code"], tools[0]["stdout"]) == ("ls /data/public", 0, "case_000\ncase_001")
    assert tools[1]["code"].startswith("cat > /workspace/plan/plan.md <<'AMB_EOF'\n# Plan\n1. load")
    assert tools[1]["tool"] == "Write" and tools[1]["stdout"] == "File created"
    assert tools[2]["exit_code"] == 2 and "boom" in tools[2]["stdout"]  # the exit code the CLI printed
    assert (out.tokens_in, out.tokens_out, out.cost_usd) == (4500, 300, 0.0123)
    # every call's arguments are what the judges and the viewer read: an execute_code call in bash
    assert json.loads(replies[1]["tool_calls"][0]["arguments"])["code"] == tools[1]["code"]


def test_claude_error_result_and_torn_last_line_are_recorded_not_raised():
    text = CLAUDE.replace('"subtype": "success", "is_error": false', '"subtype": "error_max_turns", "is_error": true')
    out = PARSERS["claude-stream-json"](text + '{"type": "assistant", "message": {"content": [{"ty')
    assert out.problem == "" and out.turns == 4 and out.skipped_lines == 1
    assert any("error_max_turns" in e for e in out.errors)
    assert any(e["type"] == "cli_error" for e in out.events)


QWEN = jsonl(
    {"type": "system", "subtype": "init", "model": "qwen3-coder", "tools": ["run_shell_command", "write_file"]},
    {"type": "assistant", "message": {"id": "a", "content": [{"type": "text", "text": "Writing the plan."}],
                                      "usage": {"input_tokens": 0, "output_tokens": 0}}},
    {"type": "assistant", "message": {"id": "b", "content": [
        {"type": "tool_use", "id": "call_1", "name": "write_file",
         "input": {"file_path": "plan/plan.md", "content": "# Plan"}}],
        "usage": {"input_tokens": 900, "output_tokens": 30}}},
    {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "call_1", "is_error": False,
                                              "content": "ok"}]}},
    {"type": "assistant", "message": {"id": "c", "content": [
        {"type": "tool_use", "id": "call_2", "name": "edit",
         "input": {"file_path": "plan/plan.md", "old_string": "# Plan", "new_string": "# Plan v2"}}]}},
    {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "call_2", "content": "ok"}]}},
    {"type": "result", "subtype": "success", "usage": {"input_tokens": 1800, "output_tokens": 60}},
)


def test_qwen_stream_json_joins_a_reply_split_over_lines():
    out = PARSERS["qwen-stream-json"](QWEN)
    replies = [e for e in out.events if e["type"] == "assistant"]
    assert out.turns == 2 and replies[0]["content"] == "Writing the plan." and replies[0]["tokens_in"] == 900
    tools = [e for e in out.events if e["type"] == "tool"]
    assert tools[0]["code"].startswith("cat > plan/plan.md <<'AMB_EOF'")
    assert "replace('# Plan', '# Plan v2', 1)" in tools[1]["code"] and tools[1]["exit_code"] == 0
    assert (out.tokens_in, out.tokens_out) == (1800, 60)


CODEX = jsonl(
    {"type": "thread.started", "thread_id": "t1"},
    {"type": "turn.started"},
    {"type": "item.completed", "item": {"id": "item_0", "type": "reasoning", "text": "Plan the pilot."}},
    {"type": "item.completed", "item": {"id": "item_1", "type": "agent_message", "text": "Running one case."}},
    {"type": "item.started", "item": {"id": "item_2", "type": "command_execution",
                                      "command": "/bin/bash -lc 'python3 seg.py case_000'", "status": "in_progress"}},
    {"type": "item.completed", "item": {"id": "item_2", "type": "command_execution",
                                        "command": "/bin/bash -lc 'python3 seg.py case_000'",
                                        "aggregated_output": "wrote 1\n", "exit_code": 0, "status": "completed"}},
    {"type": "item.completed", "item": {"id": "item_3", "type": "file_change", "status": "completed",
                                        "changes": [{"path": "/workspace/seg.py", "kind": "update"}]}},
    {"type": "item.completed", "item": {"id": "item_4", "type": "command_execution", "command": "false",
                                        "aggregated_output": "", "exit_code": 1, "status": "failed"}},
    {"type": "item.completed", "item": {"id": "item_5", "type": "agent_message", "text": "Done."}},
    {"type": "turn.completed", "usage": {"input_tokens": 5000, "cached_input_tokens": 1000, "output_tokens": 200}},
)


def test_codex_exec_json_becomes_turns():
    out = PARSERS["codex-json"](CODEX)
    replies = [e for e in out.events if e["type"] == "assistant"]
    tools = [e for e in out.events if e["type"] == "tool"]
    assert out.problem == "" and [r["turn"] for r in replies] == [1, 2, 3, 4]
    assert replies[0]["reasoning"] == "Plan the pilot." and replies[0]["content"] == "Running one case."
    assert (tools[0]["code"], tools[0]["exit_code"], tools[0]["stdout"]) == ("python3 seg.py case_000", 0, "wrote 1\n")
    assert tools[1]["tool"] == "apply_patch" and "/workspace/seg.py" in tools[1]["code"]
    assert tools[2]["exit_code"] == 1 and replies[3]["content"] == "Done."
    assert (out.tokens_in, out.tokens_out, out.tokens_cached) == (5000, 200, 1000)


def test_codex_failed_turn_is_an_error():
    out = PARSERS["codex-json"](jsonl({"type": "thread.started"}, {"type": "turn.failed",
                                                                   "error": {"message": "stream disconnected"}}))
    assert out.problem == "" and out.errors == ["stream disconnected"]


GEMINI = jsonl(
    {"type": "init", "session_id": "s", "model": "gemini-2.5-pro"},
    {"type": "message", "role": "user", "content": "the brief"},
    {"type": "message", "role": "assistant", "content": "Checking ", "delta": True},
    {"type": "message", "role": "assistant", "content": "the data.", "delta": True},
    {"type": "tool_use", "tool_name": "run_shell_command", "tool_id": "t1", "parameters": {"command": "ls"}},
    {"type": "tool_result", "tool_id": "t1", "status": "success", "output": "case_000"},
    {"type": "tool_use", "tool_name": "write_file", "tool_id": "t2",
     "parameters": {"file_path": "/workspace/a.py", "content": "print(1)"}},
    {"type": "tool_result", "tool_id": "t2", "status": "error", "output": "",
     "error": {"type": "permission", "message": "denied"}},
    {"type": "message", "role": "assistant", "content": "Done.", "delta": True},
    {"type": "result", "status": "success", "stats": {"input_tokens": 3000, "output_tokens": 90, "cached": 10}},
)


def test_gemini_stream_json_joins_deltas_and_reads_failures():
    out = PARSERS["gemini-stream-json"](GEMINI)
    replies = [e for e in out.events if e["type"] == "assistant"]
    tools = [e for e in out.events if e["type"] == "tool"]
    assert [r["content"] for r in replies] == ["Checking the data.", "", "Done."]
    assert (tools[0]["code"], tools[0]["exit_code"]) == ("ls", 0)
    assert tools[1]["exit_code"] == 1 and tools[1]["stderr"] == "denied" and tools[1]["turn"] == 2
    assert (out.tokens_in, out.tokens_out, out.tokens_cached) == (3000, 90, 10)
    failed = PARSERS["gemini-stream-json"](jsonl({"type": "init"}, {"type": "result", "status": "error",
                                                                    "error": {"message": "quota"}}))
    assert failed.problem == "" and "quota" in failed.errors[0]


OPENHANDS = "OpenHands CLI terminal UI may not work correctly\nInitializing agent...\n" + jsonl(
    {"kind": "MessageEvent", "source": "user", "llm_message": {"role": "user", "content": [{"text": "brief"}]}},
    {"kind": "ActionEvent", "source": "agent", "thought": [{"type": "text", "text": "List files."}],
     "action": {"kind": "TerminalAction", "command": "ls /data"}, "tool_name": "terminal", "tool_call_id": "c1",
     "llm_response_id": "r1"},
    {"kind": "ObservationEvent", "source": "environment", "tool_call_id": "c1",
     "observation": {"kind": "TerminalObservation", "content": [{"type": "text", "text": "case_000"}],
                     "is_error": False, "exit_code": 0}},
    {"kind": "ActionEvent", "source": "agent", "action": {"kind": "FileEditorAction", "command": "create",
                                                          "path": "/workspace/x.py", "file_text": "print(2)"},
     "tool_name": "file_editor", "tool_call_id": "c2", "llm_response_id": "r2"},
    {"kind": "ObservationEvent", "source": "environment", "tool_call_id": "c2",
     "observation": {"content": [{"type": "text", "text": "created"}], "is_error": False}},
    {"kind": "ActionEvent", "source": "agent", "action": {"kind": "TerminalAction", "command": "python x.py"},
     "tool_name": "terminal", "tool_call_id": "c3", "llm_response_id": "r3"},
    {"kind": "ObservationEvent", "tool_call_id": "c3",
     "observation": {"content": [{"text": "Traceback"}], "is_error": True, "exit_code": 1}},
    {"kind": "AgentErrorEvent", "source": "agent", "error": "the model returned no tool call"},
    {"kind": "ActionEvent", "source": "agent", "action": {"kind": "FinishAction", "message": "All done."},
     "tool_name": "finish", "tool_call_id": "c4", "llm_response_id": "r4"},
) + "Agent finished\nGoodbye!\n"


def test_openhands_events_among_status_lines():
    out = PARSERS["openhands-json"](OPENHANDS)
    replies = [e for e in out.events if e["type"] == "assistant"]
    tools = [e for e in out.events if e["type"] == "tool"]
    assert out.problem == "" and len(replies) == 4 and replies[0]["content"] == "List files."
    assert [(t["code"][:9], t["exit_code"]) for t in tools] == [("ls /data", 0), ("cat > /wo", 0), ("python x.", 1)]
    assert replies[3]["content"] == "All done." and replies[3]["tool_calls"] == []
    assert out.errors == ["the model returned no tool call"]


def _mini(messages, status="Submitted"):
    return json.dumps({"info": {"exit_status": status, "model_stats": {"instance_cost": 0.02, "api_calls": 3}},
                       "messages": messages, "trajectory_format": "mini-swe-agent-1.1"})


MINI_TOOLS = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Please solve this issue: the brief"},
    {"role": "assistant", "content": "Look around.", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}],
     "extra": {"response": {"usage": {"prompt_tokens": 700, "completion_tokens": 20}}}},
    {"role": "tool", "tool_call_id": "call_1", "content": "{\n \"returncode\": 0,\n \"output\": \"a\\n\"}",
     "extra": {"raw_output": "a\n", "returncode": 0}},
    {"role": "assistant", "content": "Break.", "tool_calls": [
        {"id": "call_2", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"exit 3\"}"}}]},
    {"role": "tool", "tool_call_id": "call_2", "content": "{\"returncode\": 3, \"output\": \"\"}"},
    {"role": "assistant", "content": "Finish.", "tool_calls": [
        {"id": "call_3", "type": "function",
         "function": {"name": "bash", "arguments": "{\"command\": \"echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\"}"}}]},
    {"role": "exit", "content": "Submitted", "extra": {"exit_status": "Submitted", "submission": ""}},
]


def test_mini_swe_agent_trajectory_tool_calls_and_text_mode():
    out = PARSERS["mini-trajectory"](_mini(MINI_TOOLS))
    tools = [e for e in out.events if e["type"] == "tool"]
    assert out.problem == "" and out.turns == 3 and out.errors == [] and out.cost_usd == 0.02
    assert [(t["code"], t["exit_code"], t["stdout"]) for t in tools] == [
        ("ls", 0, "a\n"), ("exit 3", 3, ""), ("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", 0, "")]
    assert out.events[0]["tokens_in"] == 700
    text_mode = [{"role": "assistant", "content": "```mswea_bash_command\nls\n```",
                  "extra": {"actions": [{"command": "ls"}]}},
                 {"role": "user", "content": "<returncode>0</returncode>\n<output>\nb\n</output>"}]
    out = PARSERS["mini-trajectory"](_mini(text_mode, status="LimitsExceeded"))
    tools = [e for e in out.events if e["type"] == "tool"]
    assert [(t["code"], t["exit_code"], t["stdout"]) for t in tools] == [("ls", 0, "b\n")]
    assert out.errors == ["mini-swe-agent exited: LimitsExceeded"]


def test_a_cut_or_missing_mini_trajectory_is_a_problem_not_a_crash():
    whole = _mini(MINI_TOOLS)
    assert "not a JSON object" in PARSERS["mini-trajectory"](whole[: len(whole) // 2]).problem
    assert PARSERS["mini-trajectory"]("").problem


@pytest.mark.parametrize("name", sorted(set(PARSERS) - {"mini-trajectory"}))
def test_empty_or_foreign_text_is_a_problem(name):
    for text in ("", "Error: cannot find module\n    at x.js:1\n", "[1, 2]\n\"text\"\n{\"no\": \"fields\"}\n"):
        out = PARSERS[name](text)
        assert out.problem and out.events == []


FIXTURES = {"claude-stream-json": CLAUDE, "qwen-stream-json": QWEN, "codex-json": CODEX,
            "gemini-stream-json": GEMINI, "openhands-json": OPENHANDS, "mini-trajectory": _mini(MINI_TOOLS)}


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_mangled_transcripts_never_raise(name):
    """Wrong types in every field, truncation at every tenth of the text, shuffled lines: still a Transcript."""
    text = FIXTURES[name]
    rng = random.Random(7)
    variants = [text[: len(text) * k // 10] for k in range(10)]
    lines = text.splitlines()
    for _ in range(20):
        rng.shuffle(lines)
        variants.append("\n".join(lines))
    for value in (None, 3, "x", [], {}, [{"type": "text"}], True, -1, 1e300):
        variants.append(json.dumps(_replace_values(json.loads(lines[0]) if name != "mini-trajectory"
                                                   else json.loads(text), value)))
    for variant in variants:
        out = PARSERS[name](variant)
        for event in out.events:
            json.dumps(event)  # what the trajectory must hold
            if event["type"] == "tool":
                assert isinstance(event["code"], str) and isinstance(event["stdout"], str)


def _replace_values(node, value):
    if isinstance(node, dict):
        return {k: (value if not isinstance(v, dict | list) else _replace_values(v, value)) for k, v in node.items()}
    if isinstance(node, list):
        return [_replace_values(v, value) for v in node]
    return value


def test_limits_hold_on_outsized_transcripts():
    huge = "y" * (TEXT_CAP * 20)
    line = {"type": "assistant", "message": {"content": [{"type": "tool_use", "id": "t", "name": "Bash",
                                                          "input": {"command": huge}}]}}
    result = {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t", "content": huge}]}}
    out = PARSERS["claude-stream-json"](jsonl(line, result))
    tool = next(e for e in out.events if e["type"] == "tool")
    assert len(tool["stdout"]) < TEXT_CAP + 100 and "characters left out" in tool["stdout"]
    assert len(tool["code"]) < 4 * TEXT_CAP + 100
    small = jsonl(line, result).replace(huge, "ls")
    many = small * (MAX_TURNS + 5)
    out = PARSERS["claude-stream-json"](many)
    assert out.turns == MAX_TURNS and out.dropped_turns == 5
    assert out.events[-1]["type"] == "note"
    deep = '{"type": "assistant", "message": ' + "[" * 100_000 + "]" * 100_000 + "}\n"
    assert PARSERS["claude-stream-json"](deep + jsonl(line)).turns == 1  # the too-deep line is skipped


def test_tool_code_and_shell_unwrapping():
    assert shell_text(["bash", "-lc", "echo hi"]) == "echo hi"
    assert shell_text("/bin/bash -lc 'python3 a.py && ls'") == "python3 a.py && ls"
    assert shell_text("/bin/bash -lc 'a' 'b'") == "/bin/bash -lc 'a' 'b'"  # not one command: shown as is
    assert tool_code("read_file", {"absolute_path": "/w/x y"}) == ("bash", "cat '/w/x y'")
    assert tool_code("Glob", {"pattern": "*.py"})[1].startswith("# Glob {")
    assert cap("z" * 50, 10).count("z") == 10
