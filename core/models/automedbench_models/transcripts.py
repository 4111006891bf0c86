"""Transcript parsers: each installed agent system's own machine-readable output, as the harness's turns.

Every parser reads one system's documented format and produces the same events a chat agent's run has: per model
reply an `assistant` event (its text, its reasoning where the system shows it, and its tool calls as
`execute_code` calls whose code is what the step did: the shell command, or a file write or edit written as the
shell that would do it) and per call a `tool` event (code, exit code, output). `turn` numbers the model's replies
from 1. The text is the agent's: every field is cut to a size, every line and the whole transcript are bounded,
JSON nested too deep is skipped, and a transcript with no event the parser can read is reported as `problem`
(the run then ends as the agent's failure with that reason), never raised.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterator
from typing import Any

from attrs import Factory, define

from .wiremessages import parse_bounded

MAX_TRANSCRIPT_BYTES = 32 << 20  # read at most this much of a transcript
MAX_LINE_BYTES = 4 << 20  # a longer JSONL line is skipped (counted)
MAX_TURNS = 5000  # replies kept; later ones are counted, not recorded
TEXT_CAP = 8000  # characters kept of one text, code or output (head and tail)
SUBMIT_COMMAND = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"  # mini-swe-agent's way of ending its session
EXIT_LINE = re.compile(r"(?:^|\n)\s*\[?exit[ _]code:?\s*(-?\d+)", re.I)


def cap(value: Any, limit: int = TEXT_CAP) -> str:
    """Text of at most `limit` characters (head and tail kept); anything not text is shown as JSON."""
    if not isinstance(value, str):
        try:
            value = json.dumps(value, ensure_ascii=False)[: 4 * limit]
        except (TypeError, ValueError, RecursionError):
            value = repr(value)[: 4 * limit]
    if len(value) <= limit:
        return value
    head = limit // 4
    return value[:head] + f"\n[... {len(value) - limit} characters left out ...]\n" + value[-(limit - head):]


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10**12 else 0


def json_lines(text: str, skipped: list[int]) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSONL text; lines that are not one (banners, torn last lines) are skipped and counted."""
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        item = parse_bounded(line, MAX_LINE_BYTES)
        if item is None:
            skipped[0] += 1
            continue
        if isinstance(item, dict):
            yield item


# ------------------------------------------------------------------ what a step did, as code


def shell_text(command: Any) -> str:
    """A shell command as text: a list (`["bash", "-lc", "cmd"]`) is unwrapped to the command it runs."""
    if isinstance(command, list) and all(isinstance(c, str) for c in command):
        if len(command) == 3 and command[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh") and command[1] in ("-lc", "-c"):
            return command[2]
        return shlex.join(command)
    text = _str(command)
    # Codex reports the argv it ran as one string: /bin/bash -lc '<command>'
    match = re.fullmatch(r"(?:/usr)?(?:/bin/)?(?:bash|sh|zsh) -l?c (.+)", text, re.S)
    if match:
        try:
            parts = shlex.split(match.group(1))
        except ValueError:
            return text
        if len(parts) == 1:
            return parts[0]
    return text


def write_code(path: str, content: str) -> str:
    """A file write as the shell that does it (what the judges read as code)."""
    return f"cat > {shlex.quote(path)} <<'AMB_EOF'\n{content}\nAMB_EOF"


def edit_code(path: str, old: str, new: str) -> str:
    """An in-place edit as the Python that does it."""
    return (f"python3 - <<'AMB_EOF'\nimport pathlib\np = pathlib.Path({path!r})\n"
            f"p.write_text(p.read_text().replace({old!r}, {new!r}, 1))\nAMB_EOF")


def tool_code(name: str, args: dict[str, Any]) -> tuple[str, str]:
    """(language, code) for one tool call of any of the systems, from its name and arguments."""
    low = name.lower()
    path = _str(args.get("file_path") or args.get("absolute_path") or args.get("path") or args.get("filename"))
    command = args.get("command") if "command" in args else args.get("cmd")
    if isinstance(command, str | list) and low not in ("file_editor", "str_replace_editor", "edit_file"):
        return "bash", shell_text(command)
    if low in ("write", "write_file", "create_file") or (low in ("file_editor", "str_replace_editor")
                                                          and args.get("command") == "create"):
        return "bash", write_code(path, _str(args.get("content") or args.get("file_text")))
    if low in ("edit", "replace", "multiedit", "edit_file") or args.get("command") == "str_replace":
        edits = _list(args.get("edits")) or [args]
        return "bash", "\n".join(edit_code(path, _str(_dict(e).get("old_string") or _dict(e).get("old_str")),
                                           _str(_dict(e).get("new_string") or _dict(e).get("new_str")))
                                 for e in edits[:50])
    if low in ("read", "read_file", "view") or args.get("command") == "view":
        return "bash", f"cat {shlex.quote(path)}"
    if low in ("list_directory", "ls"):
        return "bash", f"ls {shlex.quote(path or '.')}"
    if low in ("ipython", "execute_ipython_cell", "python"):
        return "python", _str(args.get("code"))
    return "bash", f"# {name} " + cap(args, 2000)


# ------------------------------------------------------------------ the common builder


@define
class Transcript:
    """What a parser made of a transcript: events, totals the system reported, and why it could not be read."""

    events: list[dict[str, Any]] = Factory(list)
    turns: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_cached: int = 0
    cost_usd: float = 0.0
    errors: list[str] = Factory(list)
    problem: str = ""
    dropped_turns: int = 0
    skipped_lines: int = 0


class Builder:
    """Collects replies, calls and results in order; numbers the replies; pairs results with their calls by id."""

    def __init__(self) -> None:
        self.out = Transcript()
        self.reply: dict[str, Any] | None = None
        self.calls: dict[str, dict[str, Any]] = {}
        self.order: list[dict[str, Any]] = []  # calls without an id, answered in order
        self.skipped = [0]
        self.read_any = False
        self.dropping = False

    def new_reply(self) -> dict[str, Any] | None:
        if self.out.turns >= MAX_TURNS:  # counted once per reply; its parts are dropped with it
            self.out.dropped_turns += 1
            self.reply, self.dropping = None, True
            return None
        self.out.turns += 1
        self.reply = {"type": "assistant", "turn": self.out.turns, "content": "", "reasoning": "",
                      "tool_calls": [], "tokens_in": 0, "tokens_out": 0, "tokens_cached": 0}
        self.out.events.append(self.reply)
        return self.reply

    def current(self) -> dict[str, Any] | None:
        if self.reply is None and self.dropping:
            return None
        return self.reply if self.reply is not None else self.new_reply()

    def text(self, text: Any, reasoning: bool = False) -> None:
        reply = self.current()
        if reply is None or not isinstance(text, str) or not text:
            return
        key = "reasoning" if reasoning else "content"
        reply[key] = cap(reply[key] + text if not reply[key] else reply[key] + "\n" + text)

    def usage(self, tokens_in: Any = 0, tokens_out: Any = 0, cached: Any = 0) -> None:
        reply = self.current()
        if reply is not None:
            reply["tokens_in"] = max(reply["tokens_in"], _count(tokens_in))
            reply["tokens_out"] = max(reply["tokens_out"], _count(tokens_out))
            reply["tokens_cached"] = max(reply["tokens_cached"], _count(cached))

    def call(self, call_id: Any, tool: str, args: dict[str, Any], language: str = "", code: str = "") -> None:
        reply = self.current()
        if reply is None:
            return
        if not code:
            language, code = tool_code(tool, args)
        call_id = _str(call_id) or f"cli_call_{self.out.turns}_{len(reply['tool_calls']) + 1}"
        code = cap(code, 4 * TEXT_CAP)
        reply["tool_calls"].append({"id": call_id[:200], "name": "execute_code", "tool": cap(tool, 100),
                                    "arguments": json.dumps({"language": language or "bash", "code": code})})
        event = {"type": "tool", "turn": self.out.turns, "call_id": call_id[:200], "name": "execute_code",
                 "tool": cap(tool, 100), "language": language or "bash", "code": code, "exit_code": None,
                 "stdout": "", "stderr": ""}
        self.out.events.append(event)
        self.calls[call_id] = event
        self.order.append(event)

    def result(self, call_id: Any, output: Any, exit_code: int | None, stderr: Any = "") -> None:
        event = self.calls.pop(_str(call_id), None) if _str(call_id) else None
        if event is None:
            event = next((e for e in self.order if e["exit_code"] is None), None)
        if event is None:
            return
        self.calls.pop(event["call_id"], None)
        event["stdout"] = cap(output if isinstance(output, str) else _joined(output))
        event["stderr"] = cap(stderr if isinstance(stderr, str) else _joined(stderr))
        event["exit_code"] = exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else 1

    def error(self, message: Any) -> None:
        text = cap(message if isinstance(message, str) else _joined(message), 1000)
        self.out.errors.append(text)
        self.out.events.append({"type": "cli_error", "turn": max(1, self.out.turns), "message": text})

    def end_reply(self) -> None:
        self.reply = None

    def finish(self, system: str) -> Transcript:
        out = self.out
        out.skipped_lines = self.skipped[0]
        if not self.read_any:
            out.problem = (f"the {system} transcript has no event this parser reads"
                           + (f" ({self.skipped[0]} unreadable lines)" if self.skipped[0] else " (empty)"))
        if out.dropped_turns:
            out.events.append({"type": "note", "turn": out.turns,
                               "note": f"{out.dropped_turns} later replies not recorded (over {MAX_TURNS})"})
        if not out.tokens_in and not out.tokens_out:  # the system gave no totals: the sum of its replies
            replies = [e for e in out.events if e["type"] == "assistant"]
            out.tokens_in = sum(e["tokens_in"] for e in replies)
            out.tokens_out = sum(e["tokens_out"] for e in replies)
        return out


def _joined(value: Any) -> str:
    """Text of a content list (`[{"type": "text", "text": ...}]`), or JSON of anything else."""
    if isinstance(value, list):
        return "\n".join(_str(_dict(v).get("text")) if isinstance(v, dict) else _str(v) for v in value[:1000])
    return "" if value is None else cap(value)


def _exit_from(text: str, is_error: bool) -> int:
    match = EXIT_LINE.search(text[:4000])
    if match:
        return int(match.group(1))
    return 1 if is_error else 0


# ------------------------------------------------------------------ Claude Code and Qwen Code: stream-json


def parse_claude_stream(text: str, system: str = "claude-code") -> Transcript:
    """`claude -p --output-format stream-json --verbose` (Qwen Code's `--output-format stream-json` is the same
    shape): `system` init, `assistant` lines (one per content block, text / thinking / tool_use), `user` lines with
    `tool_result` blocks, and a final `result` with the totals and cost. A reply is the run of assistant lines
    between two user lines."""
    b = Builder()
    after_user = True
    for item in json_lines(text, b.skipped):
        kind = item.get("type")
        message = _dict(item.get("message"))
        if kind == "system":
            b.read_any = True
        elif kind == "assistant":
            b.read_any = True
            if after_user:
                b.new_reply()
                after_user = False
            usage = _dict(message.get("usage"))
            b.usage(usage.get("input_tokens"), usage.get("output_tokens"), usage.get("cache_read_input_tokens"))
            for block in _list(message.get("content"))[:200]:
                block = _dict(block)
                if block.get("type") == "text":
                    b.text(block.get("text"))
                elif block.get("type") in ("thinking", "redacted_thinking"):
                    b.text(block.get("thinking") or "[redacted thinking]", reasoning=True)
                elif block.get("type") == "tool_use":
                    b.call(block.get("id"), _str(block.get("name")) or "tool", _dict(block.get("input")))
        elif kind == "user":
            b.read_any = True
            after_user = True
            extra = _dict(item.get("tool_use_result"))
            for block in _list(message.get("content"))[:200]:
                block = _dict(block)
                if block.get("type") != "tool_result":
                    continue
                content = block.get("content")
                output = content if isinstance(content, str) else _joined(content)
                if isinstance(extra.get("stdout"), str):
                    output = extra["stdout"]
                b.result(block.get("tool_use_id"), output,
                         _exit_from(output if block.get("is_error") else "", bool(block.get("is_error"))),
                         _str(extra.get("stderr")))
        elif kind == "result":
            b.read_any = True
            usage = _dict(item.get("usage"))
            b.out.tokens_in = _count(usage.get("input_tokens")) + _count(usage.get("cache_read_input_tokens"))
            b.out.tokens_out = _count(usage.get("output_tokens"))
            b.out.tokens_cached = _count(usage.get("cache_read_input_tokens"))
            cost = item.get("total_cost_usd")
            if isinstance(cost, int | float) and not isinstance(cost, bool) and 0 <= cost < 1e6:
                b.out.cost_usd = float(cost)
            if item.get("is_error") or str(item.get("subtype", "success")) != "success":
                why = cap(item.get("result") or item.get("error"), 500)
                b.error(f"{system} ended with {cap(item.get('subtype'), 60)}: {why}")
    return b.finish(system)


def parse_qwen_stream(text: str) -> Transcript:
    return parse_claude_stream(text, "qwen-code")


# ------------------------------------------------------------------ Codex CLI: exec --json


def parse_codex_json(text: str) -> Transcript:
    """`codex exec --json`: thread/turn lifecycle lines and `item.*` lines whose items are agent messages,
    reasoning, command executions (command, aggregated output, exit code), file changes, tool calls and errors.
    The events do not mark the model's replies: a reply is the text and reasoning before a step plus that step
    (parallel steps become replies of their own)."""
    b = Builder()
    has_tool = False
    for item in json_lines(text, b.skipped):
        kind = _str(item.get("type"))
        if kind in ("thread.started", "turn.started", "item.started", "item.updated"):
            b.read_any = True
            continue
        if kind == "turn.completed":
            b.read_any = True
            usage = _dict(item.get("usage"))
            b.out.tokens_in += _count(usage.get("input_tokens"))
            b.out.tokens_out += _count(usage.get("output_tokens"))
            b.out.tokens_cached += _count(usage.get("cached_input_tokens"))
            continue
        if kind in ("turn.failed", "error"):
            b.read_any = True
            b.error(_dict(item.get("error")).get("message") or item.get("message") or "codex error")
            continue
        if kind != "item.completed":
            continue
        b.read_any = True
        entry = _dict(item.get("item"))
        what = _str(entry.get("type") or entry.get("item_type"))
        if what in ("agent_message", "reasoning"):
            if has_tool or b.reply is None:
                b.new_reply()
                has_tool = False
            b.text(entry.get("text"), reasoning=what == "reasoning")
        elif what in ("command_execution", "file_change", "mcp_tool_call", "web_search"):
            if has_tool or b.reply is None:
                b.new_reply()
            has_tool = True
            call_id = _str(entry.get("id")) or None
            if what == "command_execution":
                b.call(call_id, "shell", {}, "bash", shell_text(entry.get("command")))
                code = entry.get("exit_code")
                failed = entry.get("status") not in ("completed", None)
                b.result(call_id, entry.get("aggregated_output"), code if isinstance(code, int) else int(failed))
            elif what == "file_change":
                changes = [_dict(c) for c in _list(entry.get("changes"))[:200]]
                listing = "\n".join(f"# {_str(c.get('kind'))} {_str(c.get('path'))}" for c in changes)
                b.call(call_id, "apply_patch", {}, "bash", "# apply_patch\n" + listing)
                b.result(call_id, listing, 0 if entry.get("status") in ("completed", None) else 1)
            elif what == "mcp_tool_call":
                b.call(call_id, f"{_str(entry.get('server'))}.{_str(entry.get('tool'))}",
                       _dict(entry.get("arguments")))
                b.result(call_id, entry.get("result") or entry.get("error"), 1 if entry.get("error") else 0)
            else:
                b.call(call_id, "web_search", {"query": entry.get("query")})
                b.result(call_id, "", 0)
        elif what == "error":
            b.error(entry.get("message"))
        elif what == "todo_list":
            b.text("todo: " + "; ".join(_str(_dict(t).get("text")) for t in _list(entry.get("items"))[:50]))
    return b.finish("codex")


# ------------------------------------------------------------------ Gemini CLI: --output-format stream-json


def parse_gemini_stream(text: str) -> Transcript:
    """`gemini -p --output-format stream-json`: `init`, `message` (user / assistant, assistant text in deltas),
    `tool_use` (name, id, parameters), `tool_result` (id, status, output, error), `error` and a final `result`
    with the token totals. A reply starts at assistant text or a tool call that follows a tool result."""
    b = Builder()
    after_result = True
    for item in json_lines(text, b.skipped):
        kind = item.get("type")
        if kind == "init":
            b.read_any = True
        elif kind == "message":
            b.read_any = True
            if item.get("role") != "assistant":
                after_result = True
                continue
            if after_result:
                b.new_reply()
                after_result = False
            if item.get("delta"):
                _append(b, item.get("content"))
            else:
                b.text(item.get("content"))
        elif kind == "tool_use":
            b.read_any = True
            if after_result:
                b.new_reply()
                after_result = False
            b.call(item.get("tool_id"), _str(item.get("tool_name")) or "tool", _dict(item.get("parameters")))
        elif kind == "tool_result":
            b.read_any = True
            after_result = True
            output = _str(item.get("output"))
            error = _dict(item.get("error"))
            failed = item.get("status") != "success"
            b.result(item.get("tool_id"), output or _str(error.get("message")), _exit_from(output, failed),
                     _str(error.get("message")))
        elif kind == "error":
            b.read_any = True
            b.error(item.get("message"))
        elif kind == "result":
            b.read_any = True
            stats = _dict(item.get("stats"))
            b.out.tokens_in = _count(stats.get("input_tokens"))
            b.out.tokens_out = _count(stats.get("output_tokens"))
            b.out.tokens_cached = _count(stats.get("cached"))
            if item.get("status") != "success":
                b.error(f"gemini ended with {cap(item.get('status'), 40)}: "
                        f"{cap(_dict(item.get('error')).get('message'), 500)}")
    return b.finish("gemini-cli")


def _append(b: Builder, delta: Any) -> None:
    """A streamed text delta joins the reply's text without a line break."""
    if b.reply is not None and isinstance(delta, str):
        b.reply["content"] = cap(b.reply["content"] + delta)


# ------------------------------------------------------------------ OpenHands: headless --json events


def parse_openhands_events(text: str) -> Transcript:
    """`openhands --headless --json`: one JSON event per line between the CLI's own status lines. `ActionEvent`
    (the reply's thought, its tool call: terminal commands, file editor actions, finish) and `ObservationEvent`
    (the tool's output, exit code, error flag) are paired by tool call id; `MessageEvent`s from the agent are its
    text; a reply is every event of one `llm_response_id`; `AgentErrorEvent` and conversation errors are errors."""
    b = Builder()
    response = None
    for item in json_lines(text, b.skipped):
        kind = _str(item.get("kind"))
        if not kind:
            continue
        b.read_any = True
        if item.get("source") == "agent" and kind in ("ActionEvent", "MessageEvent"):
            rid = item.get("llm_response_id")
            if rid != response or rid is None or b.reply is None:
                b.new_reply()
                response = rid
            for part in _list(item.get("thought"))[:100]:
                b.text(_dict(part).get("text"))
            if item.get("reasoning_content"):
                b.text(item.get("reasoning_content"), reasoning=True)
            message = _dict(item.get("llm_message"))
            content = message.get("content")
            b.text(content if isinstance(content, str) else _joined(content))
            if kind == "ActionEvent":
                action = _dict(item.get("action"))
                tool = _str(item.get("tool_name")) or _str(action.get("kind")) or "action"
                if action.get("kind") == "FinishAction":
                    b.text(action.get("message"))
                    continue
                if action.get("kind") == "ThinkAction":
                    b.text(action.get("thought"), reasoning=True)
                    continue
                b.call(item.get("tool_call_id"), tool, action)
        elif kind == "ObservationEvent":
            obs = _dict(item.get("observation"))
            output = _joined(obs.get("content"))
            code = obs.get("exit_code")
            failed = bool(obs.get("is_error"))
            b.result(item.get("tool_call_id"), output,
                     code if isinstance(code, int) and code >= 0 else int(failed))
        elif kind in ("AgentErrorEvent", "ConversationErrorEvent"):
            b.result(item.get("tool_call_id"), item.get("error"), 1) if item.get("tool_call_id") else None
            b.error(item.get("error") or item.get("detail") or kind)
    return b.finish("openhands")


# ------------------------------------------------------------------ mini-swe-agent: trajectory JSON


def parse_mini_trajectory(text: str) -> Transcript:
    """mini-swe-agent's `-o traj.json`: `messages` in the chat format (assistant messages with `bash` tool calls,
    or with one fenced bash block in the text-based configuration; tool or user messages with the observation:
    return code and output), and `info` with the exit status, the API calls and the cost."""
    b = Builder()
    data = parse_bounded(text, MAX_TRANSCRIPT_BYTES)  # 32 MB of `{},` parsed whole took ~0.8 GB of the harness
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        b.out.problem = "the mini-swe-agent trajectory is not a JSON object with messages (missing, cut or invalid)"
        return b.out
    b.read_any = True
    info = _dict(data.get("info"))
    stats = _dict(info.get("model_stats"))
    cost = stats.get("instance_cost")
    if isinstance(cost, int | float) and not isinstance(cost, bool) and 0 <= cost < 1e6:
        b.out.cost_usd = float(cost)
    pending_text: list[dict[str, Any]] = []  # text-based calls wait for the next user observation
    for message in data["messages"][:4 * MAX_TURNS]:
        message = _dict(message)
        role = message.get("role")
        content = message.get("content")
        body = content if isinstance(content, str) else _joined(content)
        extra = _dict(message.get("extra"))
        if role == "assistant":
            b.new_reply()
            usage = _dict(_dict(extra.get("response")).get("usage"))
            b.usage(usage.get("prompt_tokens"), usage.get("completion_tokens"))
            b.text(body)
            calls = _list(message.get("tool_calls"))
            for call in calls[:50]:
                function = _dict(_dict(call).get("function"))
                try:
                    args = json.loads(_str(function.get("arguments")) or "{}")
                except (ValueError, RecursionError):
                    args = {"command": _str(function.get("arguments"))}
                b.call(_dict(call).get("id"), _str(function.get("name")) or "bash", _dict(args))
            if not calls:
                for action in _list(extra.get("actions"))[:50]:
                    b.call(None, "bash", {"command": _dict(action).get("command")})
                    pending_text.append(b.order[-1])
        elif role == "tool":
            b.result(message.get("tool_call_id"), _str(extra.get("raw_output")) or _observation(body)[1],
                     _code(extra.get("returncode"), _observation(body)[0]))
        elif role == "user" and pending_text:
            code, output = _observation(body)
            event = pending_text.pop(0)
            b.result(event["call_id"], _str(extra.get("raw_output")) or output, _code(extra.get("returncode"), code))
        elif role == "exit":
            status = _str(extra.get("exit_status")) or body
            for event in b.order:  # the finishing command is answered by the exit itself, not by a tool message
                if event["exit_code"] is None and SUBMIT_COMMAND in event["code"]:
                    b.result(event["call_id"], _str(extra.get("submission")), 0)
            if status and status not in ("Submitted", "submitted"):
                b.error(f"mini-swe-agent exited: {cap(status, 200)}")
    status = _str(info.get("exit_status"))
    if status and status not in ("Submitted", "submitted") and not b.out.errors:
        b.error(f"mini-swe-agent exited: {cap(status, 200)}")
    return b.finish("mini-swe-agent")


def _code(value: Any, fallback: int | None) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else fallback


def _observation(body: str) -> tuple[int | None, str]:
    """(return code, output) of an observation: mini's JSON template or its `<returncode>` / `<output>` tags."""
    data = parse_bounded(body, MAX_LINE_BYTES) if body.lstrip().startswith("{") else None
    if isinstance(data, dict):
        code = data.get("returncode")
        output = _str(data.get("output")) if "output" in data else (
            _str(data.get("output_head")) + "\n[...]\n" + _str(data.get("output_tail")))
        return (code if isinstance(code, int) else None), output
    match = re.search(r"<returncode>\s*(-?\d+)\s*</returncode>", body[:2000])
    output = re.search(r"<output>\n?(.*?)</output>", body, re.S)
    return (int(match.group(1)) if match else None), (output.group(1) if output else body)


PARSERS: dict[str, Callable[[str], Transcript]] = {
    "claude-stream-json": parse_claude_stream,
    "qwen-stream-json": parse_qwen_stream,
    "codex-json": parse_codex_json,
    "gemini-stream-json": parse_gemini_stream,
    "openhands-json": parse_openhands_events,
    "mini-trajectory": parse_mini_trajectory,
}
