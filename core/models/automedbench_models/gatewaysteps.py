"""The steps the model gateway saw both ways: the model asked for a call in a reply, and the program's next request
carried its answer. Each such step is handed to the run's recorder (`AgentContext.steps`) the moment that request
arrives, so the harness looks at the outputs while the program waits for its model.

Pairing: each reply the gateway forwarded is kept with its calls. A request's last model turn (the reply as the
program sent it back) names the reply it continues: by call ids, else by the calls' names and arguments, else by
the text-mode command; its answers are paired with that reply's calls by id, else in order. A reply is completed
once; a later request that answers the same calls differently marks those steps `disputed` (exit code unknown).
A request whose last turn matches no reply (a side conversation, or something in the sandbox talking to the gateway
on its own) adds no step. What the program reports of a command (exit code, output) is read from its answer by
the system's own result format (`read_answer`): the program, not the command, writes the frame around the output.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

from attrs import Factory, define

from .transcripts import shell_text, tool_code
from .wiremessages import (
    MAX_TEXT,
    WireAnswer,
    WireCall,
    WireReply,
    offers_tools,
    parse_bounded,
    read_reply,
    read_tail,
    too_large,
)

MAX_REPLIES = 10_000  # replies kept for pairing (far above any turn budget)
MATCH_WINDOW = 64  # how many recent replies a request's last turn is compared with

# The tools that run a shell command, per system (the others: file writes, edits, reads, plans).
SHELL_TOOLS = {"Bash", "bash", "shell", "local_shell", "shell_command", "exec_command", "run_shell_command",
               "execute_bash", "terminal", "execute_command"}
WRITE_TOOLS = {"Write", "Edit", "MultiEdit", "write_file", "replace", "edit", "edit_file", "file_editor",
               "str_replace_editor", "create_file", "apply_patch", "NotebookEdit"}


@define
class Kept:
    """A reply the gateway forwarded, numbered as a turn (0: not an agent turn), and what became of its calls."""

    turn: int
    reply: WireReply
    completed: bool = False
    events: list[dict[str, Any]] = Factory(list)
    answers: dict[int, str] = Factory(dict)  # call index -> the answer's text, to compare a second answer with


# ------------------------------------------------------------------ each system's answer to a shell command


def _trailer(lines: list[str], pattern: re.Pattern[str]) -> int:
    """Index of the first line of the trailing block whose every line matches `pattern`."""
    at = len(lines)
    while at > 0 and pattern.fullmatch(lines[at - 1]):
        at -= 1
    return at


# Gemini CLI's and Qwen Code's lines after a command's output, in their order (each at most once)
GEMINI_TRAILER = ("Error", "Exit Code", "Signal", "Background PIDs", "Process Group PGID")
OPENHANDS_TRAILER = re.compile(r"\[[^\n]*\]")
CODEX_HEADER = re.compile(r"(?:Chunk ID|Wall time|Process exited with code|Process running with session ID|"
                          r"Original token count|Exit code|Total output lines)[: ].*")


def _gemini(code: str, text: str) -> tuple[int | None, str]:
    """Gemini CLI / Qwen Code `run_shell_command`: [Command: … Directory: …] Output: … then trailer lines in a
    fixed order (Error, Exit Code — left out on success by Gemini CLI —, Signal, Background PIDs, Process Group
    PGID), read from the end: the program appends them after whatever the command printed. An answer with none of
    that frame is the program's own refusal: the command never ran, its exit code is unknown."""
    body = text.strip()
    if body.startswith("<untrusted_context>") and body.endswith("</untrusted_context>"):
        body = body[len("<untrusted_context>"):-len("</untrusted_context>")].strip("\n")
    prefix = f"Command: {code}\n"
    if body.startswith(prefix):
        rest = body[len(prefix):]
        body = rest.split("\n", 1)[1] if rest.startswith("Directory: ") and "\n" in rest else rest
    lines = body.split("\n")
    fields: dict[str, str] = {}
    at, expected = len(lines), len(GEMINI_TRAILER)
    while at > 1:
        name, _, value = lines[at - 1].partition(": ")
        if name not in GEMINI_TRAILER[:expected]:
            break
        expected = GEMINI_TRAILER.index(name)
        fields[name] = value
        at -= 1
    exit_code: int | None = 0
    if not fields and not body.startswith("Output:"):
        # no frame at all: the program answered instead of running it (Gemini CLI 0.61 refuses any command with
        # `$(`, a backtick or `<(` this way), so no exit code; it was recorded as a success
        return None, body
    if "Exit Code" in fields:
        exit_code = int(fields["Exit Code"]) if re.fullmatch(r"-?\d+", fields["Exit Code"]) else None
    elif fields.get("Signal", "(none)") not in ("(none)", "0") or fields.get("Error", "(none)") != "(none)":
        exit_code = 1
    output = "\n".join(lines[:at])
    return exit_code, output.removeprefix("Output: ").removeprefix("Output:")


def _codex(code: str, text: str) -> tuple[int | None, str]:
    """Codex: header lines (Chunk ID, Wall time, `Process exited with code N` or `Process running with session
    ID N`, Original token count) then `Output:`; older versions: `Exit code: N` headers, or a JSON object with
    `output` and `metadata.exit_code`."""
    data = parse_bounded(text) if text.startswith("{") else None
    if isinstance(data, dict) and isinstance(data.get("metadata"), dict):
        exit_code = data["metadata"].get("exit_code")
        return (exit_code if type(exit_code) is int else None), str(data.get("output", ""))
    lines = text.split("\n")
    exit_code: int | None = None
    for index, line in enumerate(lines[:12]):
        if line == "Output:":
            return exit_code, "\n".join(lines[index + 1:])
        if not CODEX_HEADER.fullmatch(line):
            break
        match = re.fullmatch(r"(?:Process exited with code|Exit code:) (-?\d+)", line)
        if match:
            exit_code = int(match.group(1))
    return exit_code, text


def _claude(code: str, text: str, is_error: bool) -> tuple[int | None, str]:
    """Claude Code's Bash: the output; on failure the answer is flagged an error and starts `Exit code N`."""
    if not is_error:
        return 0, text
    match = re.match(r"Exit code (-?\d+)\n?", text)
    return (int(match.group(1)), text[match.end():]) if match else (1, text)


def _openhands(code: str, text: str) -> tuple[int | None, str]:
    """OpenHands' terminal: the command echoed (sometimes), its output, then bracketed lines — `[The command
    completed with exit code N.]`, `[Current working directory: …]`, `[Command finished with exit code N]`; a
    command still running says so instead (no exit code)."""
    lines = text.split("\n")
    at = _trailer(lines, OPENHANDS_TRAILER)
    exit_code = None
    for line in lines[at:]:
        match = re.fullmatch(r"\[(?:The command completed with exit code|Command finished with exit code) (-?\d+)\.?\]",
                             line)
        if match:
            exit_code = int(match.group(1))
    body = lines[:at]
    command = [c for c in code.split("\n") if c.strip()]
    shown = [i for i, line in enumerate(body) if line.strip()]
    if command and len(shown) >= len(command) and all(body[shown[k]].rstrip() == command[k].rstrip()
                                                      for k in range(len(command))):
        body = body[shown[len(command) - 1] + 1:]  # the terminal's echo of the command
    return exit_code, "\n".join(body)


def _mini(code: str, text: str) -> tuple[int | None, str]:
    """mini-swe-agent: a JSON object (`returncode`, `output` or `output_head`/`output_tail`), or in its text-based
    configuration `<returncode>N</returncode>` before `<output>…</output>`."""
    data = parse_bounded(text) if text.lstrip().startswith("{") else None
    if isinstance(data, dict):
        code_value = data.get("returncode")
        output = data.get("output") if isinstance(data.get("output"), str) else \
            f"{data.get('output_head', '')}\n[...]\n{data.get('output_tail', '')}"
        return (code_value if type(code_value) is int else None), str(output)
    head = text.split("<output", 1)[0]
    match = re.search(r"<returncode>\s*(-?\d+)\s*</returncode>", head)
    output = re.search(r"<output(?:_head)?>\n?(.*)</output(?:_tail)?>", text, re.S)
    return (int(match.group(1)) if match else None), (output.group(1) if output else text)


def read_answer(system: str, tool: str, code: str, answer: WireAnswer) -> tuple[int | None, str]:
    """(exit code or None when unknown, output) of one answer, read by the system's own result format."""
    text = answer.text
    if tool not in SHELL_TOOLS and tool != "write_stdin":
        failed = answer.is_error or (tool in WRITE_TOOLS and re.match(r"(?:Error|ERROR)\b", text) is not None)
        return (1 if failed else 0), text
    if system == "claude-code":
        return _claude(code, text, answer.is_error)
    if system == "codex":
        return _codex(code, text)
    if system in ("gemini-cli", "qwen-code"):
        return _gemini(code, text)
    if system == "openhands":
        return _openhands(code, text)
    if system == "mini-swe-agent":
        return _mini(code, text)
    return (1 if answer.is_error else 0), text


def still_running(system: str, text: str) -> str:
    """The key of a command the program reports as still running (its exit code comes with a later poll), or ''."""
    if system == "codex":
        match = re.search(r"^Process running with session ID (\d+)$", "\n".join(text.split("\n", 12)[:12]), re.M)
        return f"codex:{match.group(1)}" if match else ""
    if system == "openhands" and "\n[The command has no new output after " in text[-2000:]:
        return "openhands"
    return ""


def continues(system: str, call: WireCall) -> str:
    """The key of the running command a call polls (Codex's write_stdin, OpenHands' empty or input command), or ''."""
    if system == "codex" and call.name == "write_stdin" and type(call.args.get("session_id")) is int:
        return f"codex:{call.args['session_id']}"
    if system == "openhands" and call.name in SHELL_TOOLS and (call.args.get("command") == "" or
                                                               call.args.get("is_input") is True):
        return "openhands"
    return ""


def call_code(call: WireCall) -> tuple[str, str]:
    """(language, code) of what a call did: the shell command, or a file write or edit as the shell that does it."""
    if call.kind == "custom" and call.name == "apply_patch":
        return "bash", f"apply_patch <<'AMB_EOF'\n{call.args.get('input', '')}\nAMB_EOF"
    if call.name in SHELL_TOOLS:
        command = call.args.get("command", call.args.get("cmd"))
        if isinstance(command, str | list):
            return "bash", shell_text(command)
    return tool_code(call.name, call.args)


# ------------------------------------------------------------------ the ledger


class StepLedger:
    """Pairs the gateway's replies with the answers in the requests after them; records each step once.

    `recorder` is the run's `ObservedSteps` (None: steps are only counted). `text_mode`: the model writes its
    command in a fenced block (every reply is a turn); otherwise a reply is a turn when its request offered tools."""

    def __init__(self, system: str, wire: str, recorder: Any = None, text_mode: bool = False) -> None:
        self.system, self.wire, self.recorder, self.text_mode = system, wire, recorder, text_mode
        self.lock = threading.Lock()
        self.kept: list[Kept] = []
        self.running: dict[str, dict[str, Any]] = {}  # commands still running, by key: recorded when they end
        self.turns = 0
        self.usage = {"tokens_in": 0, "tokens_out": 0, "tokens_cached": 0, "cost_usd": 0.0}  # of recorded replies
        self.counts = {"replies": 0, "steps": 0, "unpaired_requests": 0, "unreadable": 0, "disputed": 0,
                       "too_large": 0, "side_replies": 0}

    # ---------------------------------------------------------------- the gateway's two moments

    def request(self, body: bytes) -> None:
        """A request arrived (before it is forwarded or refused): complete the steps its answers finish."""
        if too_large(body):
            with self.lock:
                self.counts["too_large"] += 1
            return
        data = parse_bounded(body) if body else None
        tail = read_tail(self.wire, data, self.text_mode) if isinstance(data, dict) else None
        if tail is None or not tail.answers:
            return
        with self.lock:
            kept = self._match(tail.reply)
            if kept is None:
                self.counts["unpaired_requests"] += 1
                return
            paired = self._pair(kept.reply.calls, tail.answers)
            if kept.completed:
                self._compare(kept, paired)
                return
            kept.completed = True
            steps = []
            for index, (call, answer) in enumerate(paired):
                if answer is None:
                    continue
                kept.answers[index] = answer.text
                step = self._step(kept.turn, index, call, answer)
                if step is not None:
                    steps.append(step)
            self.counts["steps"] += len(steps)
            if self.recorder is not None and steps:
                kept.events = self.recorder.steps(kept.turn, steps)

    def _step(self, turn: int, index: int, call: WireCall, answer: WireAnswer) -> dict[str, Any] | None:
        """The step an answered call makes; None while its command runs on (a command that outlives the program's
        wait is one step, recorded when a later poll shows it ended, with all its output: as a chat agent's call)."""
        language, code = call_code(call)
        exit_code, output = read_answer(self.system, call.name, code, answer)
        step = {"call_id": call.id or f"gw_{turn}_{index + 1}", "tool": call.name, "language": language,
                "code": code, "exit_code": exit_code, "stdout": output}
        key = continues(self.system, call)
        if key and key in self.running:  # a poll of a running command: its output joins the command's
            step = {**self.running.pop(key), "exit_code": exit_code}
            step["stdout"] = (step["stdout"] + "\n" + output)[-MAX_TEXT:]
        running = still_running(self.system, answer.text) if exit_code is None else ""
        if running:
            self.running[running] = step
            return None
        return step

    def reply(self, request_body: bytes, status: int, received: bytes, usage: dict[str, Any]) -> None:
        """The model's reply to a request was forwarded: keep it (a turn when the request offered tools). A failed
        call's time is the model's too."""
        if status >= 400 or status < 200:
            if self.recorder is not None:
                self.recorder.model_time(usage.get("latency_s", 0.0))
            return
        data = parse_bounded(request_body) if request_body else None
        reply = read_reply(self.wire, received, self.text_mode)
        with self.lock:
            if reply is None or not (self.text_mode or offers_tools(data) or reply.calls):
                self.counts["unreadable" if reply is None else "side_replies"] += 1
                if self.recorder is not None:
                    self.recorder.model_time(usage.get("latency_s", 0.0))
                return
            if len(self.kept) >= MAX_REPLIES:
                return
            self.turns += 1
            self.counts["replies"] += 1
            kept = Kept(self.turns, reply)
            self.kept.append(kept)
            if self.recorder is not None:
                calls = []
                for index, call in enumerate(reply.calls):
                    language, code = call_code(call)
                    calls.append({"id": call.id or f"gw_{kept.turn}_{index + 1}", "tool": call.name,
                                  "arguments": json.dumps({"language": language, "code": code})})
                self.recorder.reply(kept.turn, reply.content, reply.reasoning, calls, **usage)
                for name in self.usage:
                    self.usage[name] += usage.get(name, 0)

    # ---------------------------------------------------------------- pairing

    def _match(self, turn: WireReply) -> Kept | None:
        """The kept reply a request's last model turn sends back: pending ones first, the most recent first."""
        recent = self.kept[-MATCH_WINDOW:][::-1]
        for pending_only in (True, False):
            pool = [k for k in recent if not (pending_only and k.completed) and k.reply.calls]
            for test in (_same_ids, _same_calls, _same_text):
                found = next((k for k in pool if test(k.reply, turn)), None)
                if found is not None:
                    return found
        return None

    @staticmethod
    def _pair(calls: list[WireCall], answers: list[WireAnswer]) -> list[tuple[WireCall, WireAnswer | None]]:
        by_id = {a.id: a for a in answers if a.id}
        left = [a for a in answers if not a.id or a.id not in {c.id for c in calls}]
        out = []
        for call in calls:
            answer = by_id.get(call.id) if call.id else None
            if answer is None:
                answer = next((a for a in left if not a.name or a.name == call.name), None)
                if answer is not None:
                    left.remove(answer)
            out.append((call, answer))
        return out

    def _compare(self, kept: Kept, paired: list[tuple[WireCall, WireAnswer | None]]) -> None:
        """A second answer to calls already answered: the same is a repeat; a different one disputes the step."""
        by_id = {e.get("call_id"): e for e in kept.events}
        for index, (call, answer) in enumerate(paired):
            if answer is None or index not in kept.answers or kept.answers[index] == answer.text:
                continue
            self.counts["disputed"] += 1
            event = by_id.get(call.id or f"gw_{kept.turn}_{index + 1}")
            if event is not None and not event.get("disputed"):
                event["exit_code"] = None
                event["disputed"] = "a later request answered this call differently; its exit code is unknown"

    def asked(self) -> list[tuple[str, int | None, bool]]:
        """(code, exit code, answered) of every call the model made in a turn, in order."""
        with self.lock:
            out = []
            recorded = {e.get("call_id"): e for kept in self.kept for e in kept.events}
            for kept in self.kept:
                for index, call in enumerate(kept.reply.calls):
                    event = recorded.get(call.id or f"gw_{kept.turn}_{index + 1}")
                    code = event.get("code", "") if event is not None else call_code(call)[1]
                    out.append((code, event.get("exit_code") if event is not None else None, event is not None))
            return out

    def summary(self) -> dict[str, Any]:
        with self.lock:
            pending = sum(len(k.reply.calls) for k in self.kept if not k.completed)
            return {**self.counts, "unanswered_calls": pending, "still_running": len(self.running)}


def _same_ids(kept: WireReply, turn: WireReply) -> bool:
    ids = [c.id for c in turn.calls]
    return bool(ids) and all(ids) and ids == [c.id for c in kept.calls]


def _same_calls(kept: WireReply, turn: WireReply) -> bool:
    return bool(turn.calls) and [c.fingerprint() for c in turn.calls] == [c.fingerprint() for c in kept.calls]


def _same_text(kept: WireReply, turn: WireReply) -> bool:
    return bool(turn.calls) and all(c.kind == "text" for c in turn.calls) and \
        [c.arguments for c in turn.calls] == [c.arguments for c in kept.calls]
