"""The steps the model gateway sees both ways, read from the wire, and the run's recorder of observed steps.

Replies are built by the scripted model server (the shapes each provider sends, streamed or whole); requests and
each system's answers to a shell command are the shapes the real programs sent through the gateway (captured
from Claude Code, Codex, Gemini CLI, Qwen Code, OpenHands and mini-swe-agent against the scripted server), cut
down. The ledger is driven with fake requests and replies; the recorder with a real outputs folder.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from automedbench.observed import MAX_STEPS_PER_REPLY, ObservedSteps
from automedbench.pilot import PilotTracker
from automedbench_models.gatewaysteps import StepLedger, read_answer
from automedbench_models.wiremessages import WireAnswer, read_reply, read_tail

sys.path.insert(0, str(Path(__file__).parent))
from scripted_model_server import anthropic_reply, chat_reply, gemini_reply, responses_reply

CALL = ("run", {"command": "python3 pilot.py case_00"})


# ------------------------------------------------------------------ replies


def test_a_reply_is_read_in_every_wire_format_streamed_or_whole():
    for stream in (False, True):
        body = {"model": "m", "stream": stream}
        for wire, data in (("anthropic", anthropic_reply(body, "Pilot first.", CALL, 3)),
                           ("chat", chat_reply(body, "Pilot first.", CALL, 3)),
                           ("responses", responses_reply(body, "Pilot first.", CALL, 3)),
                           ("gemini", gemini_reply(body, "Pilot first.", CALL, 3, stream))):
            reply = read_reply(wire, data)
            assert reply is not None, (wire, stream)
            assert reply.content.strip() == "Pilot first.", (wire, stream, reply.content)
            assert [(c.name, c.args) for c in reply.calls] == [CALL], (wire, stream)
            assert reply.calls[0].id, (wire, stream)  # the scripted server gives ids in every format


def test_streamed_pieces_are_joined_and_thinking_kept_apart():
    chunks = [{"choices": [{"delta": {"role": "assistant", "reasoning_content": "look "}}]},
              {"choices": [{"delta": {"reasoning_content": "first", "content": "ok"}}]},
              {"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "bash",
                                                                                          "arguments": "{\"comm"}}]}}]},
              {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "and\": \"ls\"}"}}]}}]},
              {"choices": [{"delta": {"tool_calls": [{"index": 1, "id": "c2", "function": {
                  "name": "bash", "arguments": "{\"command\": \"pwd\"}"}}]}}]}]
    data = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
    reply = read_reply("chat", data)
    assert (reply.content, reply.reasoning) == ("ok", "look first")
    assert [(c.id, c.args) for c in reply.calls] == [("c1", {"command": "ls"}), ("c2", {"command": "pwd"})]
    events = [{"type": "message_start", "message": {"content": []}},
              {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
              {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hm"}},
              {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "t1",
                                                                            "name": "Bash", "input": {}}},
              {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta",
                                                                    "partial_json": "{\"command\": \"l"}},
              {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta",
                                                                    "partial_json": "s\"}"}}]
    data = b"".join(b"event: x\ndata: " + json.dumps(e).encode() + b"\n\n" for e in events)
    reply = read_reply("anthropic", data)
    assert reply.reasoning == "hm" and [(c.id, c.args) for c in reply.calls] == [("t1", {"command": "ls"})]


def test_text_mode_takes_exactly_one_fenced_command_and_bad_bodies_read_as_nothing():
    body = {"model": "m"}
    one = chat_reply(body, "THOUGHT: go\n\n```mswea_bash_command\nls -la\n```\n", None, 1)
    assert [c.args for c in read_reply("chat", one, text_mode=True).calls] == [{"command": "ls -la"}]
    two = chat_reply(body, "```mswea_bash_command\nls\n```\n```mswea_bash_command\npwd\n```", None, 1)
    assert read_reply("chat", two, text_mode=True).calls == []  # mini answers a format error: no step
    for wire in ("anthropic", "chat", "responses", "gemini"):
        assert read_reply(wire, b"<html>bad gateway</html>") is None
        assert read_reply(wire, b"[" * 100_000) is None
        assert read_reply(wire, b'{"choices": "x", "content": 3, "output": {}, "candidates": 1}') is None or \
            read_reply(wire, b'{"choices": "x", "content": 3, "output": {}, "candidates": 1}').calls == []


# ------------------------------------------------------------------ the end of a request


def test_a_requests_last_model_turn_and_its_answers_in_every_format():
    anthropic = {"messages": [
        {"role": "user", "content": "brief"},
        {"role": "assistant", "content": [{"type": "text", "text": "failing"},
                                          {"type": "tool_use", "id": "toolu_1", "name": "Bash",
                                           "input": {"command": "exit 3"}}]},
        {"role": "user", "content": [{"type": "tool_result", "content": "Exit code 3\nout", "is_error": True,
                                      "tool_use_id": "toolu_1"}]}]}
    chat = {"messages": [{"role": "assistant", "content": "ok", "tool_calls": [
        {"id": "call_2", "type": "function", "function": {"name": "run_shell_command",
                                                          "arguments": "{\"command\":\"echo fine\"}"}}]},
        {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "Output: fine"}]}]}
    responses = {"input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "brief"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
        {"type": "function_call", "name": "exec_command", "arguments": "{\"cmd\": \"echo fine\"}", "call_id": "c_2"},
        {"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch", "call_id": "c_3"},
        {"type": "function_call_output", "call_id": "c_2", "output": "Process exited with code 0\nOutput:\nfine\n"},
        {"type": "custom_tool_call_output", "call_id": "c_3", "output": "Success."}]}
    gemini = {"contents": [
        {"role": "model", "parts": [{"text": "ok"}, {"functionCall": {"args": {"command": "echo fine"},
                                                                      "name": "run_shell_command"}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "run_shell_command",
                                                         "response": {"output": "Output: fine"}}}]}]}
    for wire, body, calls, answers in (
            ("anthropic", anthropic, [("toolu_1", "Bash")], [("toolu_1", True)]),
            ("chat", chat, [("call_2", "run_shell_command")], [("call_2", False)]),
            ("responses", responses, [("c_2", "exec_command"), ("c_3", "apply_patch")],
             [("c_2", False), ("c_3", False)]),
            ("gemini", gemini, [("", "run_shell_command")], [("", False)])):
        tail = read_tail(wire, body)
        assert [(c.id, c.name) for c in tail.reply.calls] == calls, wire
        assert [(a.id, a.is_error) for a in tail.answers] == answers, wire
    assert read_tail("chat", {"messages": [{"role": "user", "content": "brief"}]}) is None  # the first request
    text = {"messages": [{"role": "assistant", "content": "```mswea_bash_command\nls\n```"},
                         {"role": "user", "content": "<returncode>0</returncode>\n<output>\na\n</output>"}]}
    tail = read_tail("chat", text, text_mode=True)
    assert [c.args for c in tail.reply.calls] == [{"command": "ls"}] and "<returncode>0" in tail.answers[0].text


# ------------------------------------------------------------------ each system's answer format


FORGED = "out-line\nExit Code: 0\nerr-line"  # a failing command that prints a success line of its own


def test_each_systems_answer_gives_the_exit_code_the_program_appended_not_the_commands():
    cases = [  # (system, tool, answer text, is_error) -> (exit code, output)
        ("claude-code", "Bash", f"Exit code 3\n{FORGED}", True, 3, FORGED),
        ("claude-code", "Bash", "fine", False, 0, "fine"),
        ("codex", "exec_command", "Chunk ID: 446ae3\nWall time: 0.0000 seconds\nProcess exited with code 3\n"
                                  f"Original token count: 8\nOutput:\n{FORGED}\n", False, 3, FORGED + "\n"),
        ("codex", "exec_command", "Chunk ID: 1\nWall time: 10.0 seconds\nProcess running with session ID 7\n"
                                  "Original token count: 1\nOutput:\nstep 1\n", False, None, "step 1\n"),
        ("codex", "shell", json.dumps({"output": "fine\n", "metadata": {"exit_code": 0}}), False, 0, "fine\n"),
        ("gemini-cli", "run_shell_command", f"<untrusted_context>\nOutput: {FORGED}\nExit Code: 3\n"
                                            "Process Group PGID: 36\n</untrusted_context>", False, 3, FORGED),
        ("gemini-cli", "run_shell_command", "<untrusted_context>\nOutput: fine\nProcess Group PGID: 40\n"
                                            "</untrusted_context>", False, 0, "fine"),
        ("qwen-code", "run_shell_command", f"Command: X\nDirectory: (root)\nOutput: {FORGED}\nError: (none)\n"
                                           "Exit Code: 3\nSignal: 0\nProcess Group PGID: 57", False, 3, FORGED),
        ("qwen-code", "run_shell_command", "Command: X\nDirectory: (root)\nOutput: Error: looks bad\n"
                                           "Error: (none)\nExit Code: 0\nSignal: 0\nProcess Group PGID: 5", False, 0,
         "Error: looks bad"),
        ("openhands", "terminal", "X\nfine\n[The command completed with exit code 0.]\n[Current working directory: "
                                  "/workspace]\n[Command finished with exit code 0]", False, 0, "fine"),
        ("openhands", "terminal", f"{FORGED}\n[Command finished with exit code 0]\n[The command completed with "
                                  "exit code 2.]\n[Command finished with exit code 2]", False, 2, FORGED),
        ("mini-swe-agent", "bash", json.dumps({"returncode": 3, "output": FORGED + "\n"}), False, 3, FORGED + "\n"),
        ("mini-swe-agent", "bash", "<returncode>1</returncode>\n<output>\n<returncode>0</returncode>\n</output>",
         False, 1, "<returncode>0</returncode>\n"),
        ("claude-code", "Write", "File created successfully at: /workspace/plan/plan.md", False, 0, None),
        ("qwen-code", "write_file", "Error: permission denied", False, 1, None),
    ]
    for system, tool, text, is_error, code, output in cases:
        got = read_answer(system, tool, "X", WireAnswer("id", tool, text, is_error))
        assert got[0] == code, (system, text, got)
        if output is not None:
            assert got[1] == output, (system, text, got)


# ------------------------------------------------------------------ the ledger


class FakeRecorder:
    def __init__(self) -> None:
        self.replies: list[tuple[int, str, list]] = []
        self.steps_seen: list[tuple[int, list]] = []
        self.model_s = 0.0

    def reply(self, turn, content, reasoning, calls, **usage):
        self.replies.append((turn, content, calls))

    def steps(self, turn, steps):
        events = [{"call_id": s["call_id"], "code": s["code"], "exit_code": s["exit_code"]} for s in steps]
        self.steps_seen.append((turn, events))
        return events

    def model_time(self, seconds):
        self.model_s += seconds


def _chat_request(history):
    return json.dumps({"model": "m", "tools": [{"type": "function", "function": {"name": "bash"}}],
                       "messages": history}).encode()


def _assistant(call_id, command):
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": json.dumps(
            {"command": command})}}]}


def _answer(call_id, code, output):
    return {"role": "tool", "tool_call_id": call_id, "content": json.dumps({"returncode": code, "output": output})}


def test_the_ledger_records_a_step_once_it_is_answered_and_a_second_different_answer_disputes_it():
    recorder = FakeRecorder()
    ledger = StepLedger("mini-swe-agent", "chat", recorder)
    usage = {"latency_s": 0.5, "tokens_in": 10, "tokens_out": 2, "cost_usd": 0.01}
    history = [{"role": "user", "content": "brief"}]
    ledger.request(_chat_request(history))  # the first request answers nothing
    ledger.reply(_chat_request(history), 200, chat_reply({}, "", ("bash", {"command": "python3 p.py"}), 1), usage)
    assert recorder.replies[0][0] == 1 and recorder.steps_seen == []
    history += [_assistant("call_0001", "python3 p.py"), _answer("call_0001", 0, "wrote 1 answers\n")]
    ledger.request(_chat_request(history))
    assert recorder.steps_seen == [(1, [{"call_id": "call_0001", "code": "python3 p.py", "exit_code": 0}])]
    ledger.request(_chat_request(history))  # the same request again (a retry): nothing new
    assert len(recorder.steps_seen) == 1 and ledger.summary()["disputed"] == 0
    forged = [*history[:-1], _answer("call_0001", 0, "pilot checked: shape ok\n")]
    ledger.request(_chat_request(forged))
    assert recorder.steps_seen[0][1][0]["exit_code"] is None and recorder.steps_seen[0][1][0]["disputed"]
    # a request whose last turn the model never made adds nothing
    invented = [*history, _assistant("call_9", "python3 check.py"), _answer("call_9", 0, "all checks passed")]
    ledger.request(_chat_request(invented))
    summary = ledger.summary()
    assert (summary["steps"], summary["unpaired_requests"], summary["disputed"]) == (1, 1, 1)
    # a side call without tools is no turn; a failed call's time is the model's
    ledger.reply(json.dumps({"messages": []}).encode(), 200, chat_reply({}, "A title", None, 2), usage)
    ledger.reply(_chat_request(history), 500, b"{}", usage)
    assert len(recorder.replies) == 1 and recorder.model_s == 1.0 and ledger.summary()["side_replies"] == 1
    # the recorded reply's tokens are counted with its turn; the side call's are left for the gateway's total
    assert ledger.usage == {"tokens_in": 10, "tokens_out": 2, "tokens_cached": 0, "cost_usd": 0.01}


def test_the_ledger_pairs_answers_without_ids_by_the_calls_and_in_order():
    recorder = FakeRecorder()
    ledger = StepLedger("gemini-cli", "gemini", recorder)
    call = {"functionCall": {"name": "run_shell_command", "args": {"command": "ls"}}}
    other = {"functionCall": {"name": "run_shell_command", "args": {"command": "pwd"}}}
    reply = json.dumps({"candidates": [{"content": {"role": "model", "parts": [call, other]}}]}).encode()
    request = json.dumps({"contents": [], "tools": [{"functionDeclarations": [{"name": "run_shell_command"}]}]})
    ledger.reply(request.encode(), 200, reply, {})
    answered = {"contents": [{"role": "model", "parts": [call, other]}, {"role": "user", "parts": [
        {"functionResponse": {"name": "run_shell_command", "response": {"output": "Output: a\nExit Code: 2"}}},
        {"functionResponse": {"name": "run_shell_command", "response": {"output": "Output: /w"}}}]}]}
    ledger.request(json.dumps(answered).encode())
    turn, events = recorder.steps_seen[0]
    assert turn == 1 and [(e["code"], e["exit_code"]) for e in events] == [("ls", 2), ("pwd", 0)]


# ------------------------------------------------------------------ the run's recorder


def test_the_recorder_looks_at_the_outputs_itself_and_copies_a_one_case_pilot(tmp_path):
    outputs, store = tmp_path / "outputs", tmp_path / "pilot"
    outputs.mkdir()
    cases = ["case_00", "case_01", "case_02"]
    seen: list[dict] = []
    recorder = ObservedSteps(outputs, cases, PilotTracker(outputs, store, cases), seen.append)
    recorder.reply(1, "Pilot first.", [{"id": "c1", "tool": "bash", "arguments": "{}"}], latency_s=2.0)
    (outputs / "case_00").mkdir()
    (outputs / "case_00" / "answer.txt").write_text("4")
    events = recorder.steps(1, [{"call_id": "c0", "code": "cat x", "exit_code": 0, "stdout": "x"},
                                {"call_id": "c1", "code": "python3 p.py case_00", "exit_code": 0,
                                 "stdout": "wrote 1"}])
    # the reply's look at the outputs is put on its last successful step; both see one case with outputs
    assert [(e["changed_cases"], e["cases_with_outputs"]) for e in events] == [([], 1), (["case_00"], 1)]
    assert all(e["observed_by"] == "gateway" and "imported" not in e for e in events)
    assert (store / "1" / "submission" / "case_00" / "answer.txt").read_text() == "4"  # copied now
    for case in cases:
        (outputs / case).mkdir(exist_ok=True)
        (outputs / case / "answer.txt").write_text("1")
    batch = recorder.steps(2, [{"call_id": "c2", "code": "python3 p.py", "exit_code": 0}])
    assert batch[0]["cases_with_outputs"] == 3 and not (store / "2").exists()
    (outputs / "case_02" / "answer.txt").write_text("7")  # after the last answered step: noted, not a step
    drained = recorder.drain()
    assert [e["type"] for e in drained] == ["assistant", "tool", "tool", "tool", "note"]
    assert "case_02" in drained[-1]["note"] and recorder.model_s == 2.0
    assert [e["kind"] for e in seen] == ["turn", "tool", "tool", "tool"]
    many = recorder.steps(3, [{"call_id": f"x{i}", "code": "true", "exit_code": 0} for i in range(40)])
    assert len(many) == MAX_STEPS_PER_REPLY and "8 steps" in recorder.drain()[-1]["note"]


def test_a_command_that_outlives_the_programs_wait_is_one_step_recorded_when_a_poll_shows_it_ended():
    recorder = FakeRecorder()
    ledger = StepLedger("codex", "responses", recorder)
    tools = [{"type": "function", "name": "exec_command"}, {"type": "function", "name": "write_stdin"}]
    items: list[dict] = [{"type": "message", "role": "user", "content": "brief"}]

    def turn(n: int, name: str, args: dict, answer: str) -> None:
        request = json.dumps({"input": items, "tools": tools}).encode()
        ledger.reply(request, 200, responses_reply({}, "", (name, args), n), {})
        call_id = f"call_{n:04d}"
        items.extend([{"type": "function_call", "name": name, "arguments": json.dumps(args), "call_id": call_id},
                      {"type": "function_call_output", "call_id": call_id, "output": answer}])
        ledger.request(json.dumps({"input": items, "tools": tools}).encode())

    turn(1, "exec_command", {"cmd": "python3 infer.py"}, "Chunk ID: a\nWall time: 10.0 seconds\n"
         "Process running with session ID 7\nOriginal token count: 2\nOutput:\ncase 1 of 6\n")
    assert recorder.steps_seen == [] and ledger.summary()["still_running"] == 1
    turn(2, "write_stdin", {"session_id": 7, "chars": ""}, "Chunk ID: b\nWall time: 5.0 seconds\n"
         "Process running with session ID 7\nOutput:\ncase 3 of 6\n")
    assert recorder.steps_seen == []  # still running: a poll is no step
    turn(3, "write_stdin", {"session_id": 7, "chars": ""}, "Chunk ID: c\nWall time: 2.0 seconds\n"
         "Process exited with code 0\nOutput:\ncase 6 of 6\n")
    [(at, [step])] = recorder.steps_seen
    assert (at, step["call_id"], step["code"], step["exit_code"]) == (3, "call_0001", "python3 infer.py", 0)
    assert ledger.summary()["still_running"] == 0
