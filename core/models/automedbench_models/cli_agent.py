"""Installed CLI agents: a coding-agent command run inside the sandbox with the brief.

How it fits the runner: turn 1 is ONE `execute_code(bash)` call that writes the brief to
`<workspace>/.agent_cli/brief.md`, copies the spec's bundled files there, runs the install step and
then the command (so the CLI works under the same isolation, limits and tripwires as any agent). After
that call the agent reads the CLI's own log from the host side of the workspace (regular file only,
no symlinks, size-capped), turns it into trajectory events with the spec's parser, and hands them to the
runner (`drain_events`, written as `imported` events the judges read). Turn 2 calls `submit_results`
if the CLI exited 0 (and `submit` is on); otherwise the agent stops.

Give the CLI the whole budget with `--exec-timeout` (the call is bounded by the per-call timeout).

A plugin declares a CLI agent with a `CliAgentSpec` and registers `partial(CliAgent, spec)`; or
`--agent cli --agent-option spec=cli.yaml` with the same fields in YAML.
"""

from __future__ import annotations

import base64
import json
import os
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attrs import Factory, define, fields
from automedbench.api import Agent, AgentContext, AgentTurn, ToolCall, UserError, open_below, read_regular, read_yaml

from .wiremessages import parse_bounded

CLI_DIR = ".agent_cli"
MAX_LOG_BYTES = 20 << 20
TEXT_CAP = 4000
# steps and messages taken from a log (as the installed systems' transcripts keep 5000 replies): 20 MB of one-line
# messages were 582 541 events, each written and synced to the trajectory and read by every judge and detector
MAX_EVENTS = 5000


@define
class CliAgentSpec:
    """How to install, invoke and read one CLI agent. Templates see {brief} {kickoff} {workspace}
    {data_dir} {log} {dir} (shell-quoted). `env` is for plain settings only: the script, and so every
    value in it, is recorded in the trajectory."""

    name: str
    command: str
    install: str = ""
    files: dict[str, str] = Factory(dict)
    log: str = "{dir}/log.jsonl"
    log_format: str = "steps-jsonl"
    submit: bool = True
    env: dict[str, str] = Factory(dict)


# ------------------------------------------------------------------ log parsers


def _cap(text: Any) -> str:
    text = text if isinstance(text, str) else json.dumps(text)
    return text if len(text) <= TEXT_CAP else text[:1000] + "\n[...]\n" + text[-(TEXT_CAP - 1000):]


def parse_steps_jsonl(text: str) -> list[dict[str, Any]]:
    """The harness's own simple format, one JSON object per line:
    {"type": "tool", "language": "bash", "code": "...", "exit_code": 0, "stdout": "...", "stderr": "..."}
    {"type": "message", "content": "..."}"""
    events = []
    for line in text.splitlines():
        item = parse_bounded(line, MAX_LOG_BYTES)  # None: not JSON, too deep or too many objects for the harness
        if not isinstance(item, dict):
            continue
        if item.get("type") == "tool":
            events.append({"type": "tool", "name": "execute_code", "language": item.get("language", "bash"),
                           "code": _cap(item.get("code") or item.get("command") or ""),
                           "exit_code": item.get("exit_code"), "stdout": _cap(item.get("stdout") or ""),
                           "stderr": _cap(item.get("stderr") or "")})
        elif item.get("type") == "message":
            events.append({"type": "cli_message", "content": _cap(item.get("content") or "")})
    return events


def parse_claude_stream_json(text: str) -> list[dict[str, Any]]:
    """Best-effort reader of a `--output-format stream-json` log: text blocks become messages,
    tool_use blocks tool events, tool_result blocks fill in their output and error flag."""
    events: list[dict[str, Any]] = []
    pending: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        item = parse_bounded(line, MAX_LOG_BYTES)  # None: not JSON, too deep or too many objects for the harness
        message = item.get("message") if isinstance(item, dict) else None
        if not isinstance(message, dict) or not isinstance(message.get("content"), list):
            continue
        for block in message["content"]:
            kind = block.get("type")
            if item.get("type") == "assistant" and kind == "text":
                events.append({"type": "cli_message", "content": _cap(block.get("text", ""))})
            elif item.get("type") == "assistant" and kind == "tool_use":
                args = block.get("input") or {}
                code = args.get("command") or args.get("content") or json.dumps(args)
                event = {"type": "tool", "name": "execute_code", "language": "bash", "tool": block.get("name"),
                         "code": _cap(code), "exit_code": None, "stdout": "", "stderr": ""}
                pending[block.get("id", "")] = event
                events.append(event)
            elif kind == "tool_result" and block.get("tool_use_id") in pending:
                event = pending.pop(block["tool_use_id"])
                content = block.get("content")
                if isinstance(content, list):
                    content = "\n".join(c.get("text", "") for c in content if isinstance(c, dict))
                event["stdout"] = _cap(content or "")
                event["exit_code"] = 1 if block.get("is_error") else 0
    return events


LOG_PARSERS: dict[str, Callable[[str], list[dict[str, Any]]]] = {
    "steps-jsonl": parse_steps_jsonl,
    "claude-stream-json": parse_claude_stream_json,
    "none": lambda text: [],
}


def load_spec(path: Path) -> CliAgentSpec:
    data = read_yaml(path, "CLI agent spec")
    known = {f.name for f in fields(CliAgentSpec)}
    if not isinstance(data, dict) or "command" not in data:
        raise UserError(f"CLI agent spec {path}: needs at least 'command'")
    unknown = sorted(set(data) - known)
    if unknown:
        raise UserError(f"CLI agent spec {path}: unknown field(s) {', '.join(unknown)}; known: {', '.join(known)}")
    data.setdefault("name", path.stem)
    files = {k: str((path.parent / v).resolve()) for k, v in (data.get("files") or {}).items()}
    return CliAgentSpec(**{**data, "files": files})


# ------------------------------------------------------------------ the agent


def session_exit_code(messages: list[dict[str, Any]]) -> int | None:
    """The exit code of the session call, from the runner's answer to it (`exit_code: N` on its first line)."""
    last = next((m for m in reversed(messages) if m.get("role") == "tool"), {})
    content = last.get("content") or ""
    head = content.split("\n", 1)[0].removeprefix("exit_code: ")
    return int(head) if content.startswith("exit_code: ") and head.lstrip("-").isdigit() else None


def stop_message(name: str, code: int | None, turn: int) -> str:
    """Why a session agent stops: the session's exit code and, on a turn after the harness's own submit (which
    ended the run when accepted), that the submission was refused. The code is the session's, not the
    submit's (read again after the submit, it was None: "exited None")."""
    return f"{name} exited {code}; " + ("the submission was refused; stopping." if turn > 2 else "stopping.")


class CliAgent(Agent):
    session_calls = True  # turn 1 runs the CLI itself: its steps are what it logged (imported) or the harness saw

    def __init__(self, spec: CliAgentSpec | str | None = None) -> None:
        if spec is None:
            raise UserError("the cli agent needs --agent-option spec=cli.yaml (install, command, log_format)")
        if not isinstance(spec, CliAgentSpec):
            spec = load_spec(Path(spec).expanduser())
        if spec.log_format not in LOG_PARSERS:
            raise UserError(f"cli agent {spec.name}: unknown log_format {spec.log_format!r}; known: "
                            f"{', '.join(LOG_PARSERS)}")
        for name, src in spec.files.items():
            if "/" in name or not Path(src).is_file():
                raise UserError(f"cli agent {spec.name}: bundled file {name!r} -> {src} is not a plain file")
        self.spec = spec
        self.name = spec.name
        self.context: AgentContext | None = None
        self.turn = 0
        self.pending: list[dict[str, Any]] = []
        self.exit_code: int | None = None

    def start(self, context: AgentContext) -> None:
        self.context = context

    def _paths(self) -> dict[str, str]:
        assert self.context is not None
        ws = self.context.workspace_dir
        base = {"workspace": ws, "data_dir": self.context.data_dir, "dir": f"{ws}/{CLI_DIR}",
                "brief": f"{ws}/{CLI_DIR}/brief.md", "kickoff": self.context.kickoff}
        base["log"] = self.spec.log.format(**base)
        return base

    def script(self) -> str:
        assert self.context is not None
        paths = self._paths()
        quoted = {k: shlex.quote(v) for k, v in paths.items()}
        brief = base64.b64encode(self.context.brief.encode()).decode()
        lines = ["set -e", f"mkdir -p {quoted['dir']}", f"echo {brief} | base64 -d > {quoted['brief']}"]
        for name, src in self.spec.files.items():
            data = base64.b64encode(Path(src).read_bytes()).decode()
            target = shlex.quote(f"{paths['dir']}/{name}")
            lines += [f"echo {data} | base64 -d > {target}", f"chmod +x {target}"]
        lines += [f"export {k}={shlex.quote(v)}" for k, v in self.spec.env.items()]
        if self.spec.install:
            lines.append(self.spec.install.format(**quoted))
        lines += ["set +e", self.spec.command.format(**quoted), "status=$?",
                  f'echo "[cli agent {self.spec.name} exited $status]"', "exit $status"]
        return "\n".join(lines) + "\n"

    def _read_log(self) -> str:
        assert self.context is not None
        if not self.context.host_workspace:
            return ""
        relative = os.path.relpath(self._paths()["log"], self.context.workspace_dir)
        if relative.startswith(".."):
            return ""
        # the workspace is the agent's: every folder on the way is opened without following symlinks
        try:
            folder = open_below(self.context.host_workspace, Path(relative).parent.parts, directory=True)
        except OSError:
            return ""
        try:
            data = read_regular(folder, os.path.basename(relative), MAX_LOG_BYTES, head=True)
        finally:
            os.close(folder)
        return data.decode("utf-8", "replace") if data is not None else ""

    def next_turn(self, messages: list[dict[str, Any]]) -> AgentTurn:
        self.turn += 1
        if self.turn == 1:
            args = json.dumps({"language": "bash", "code": self.script()})
            return AgentTurn(f"Running the {self.spec.name} CLI inside the sandbox with the brief.",
                             [ToolCall("cli_run", "execute_code", args)], finish_reason="cli")
        if self.turn == 2:  # the answer to the session call; later answers are the harness's submit
            self.exit_code = session_exit_code(messages)
        code = self.exit_code
        if self.turn == 2 and code == 0 and self.spec.submit:
            submit = ToolCall("cli_submit", "submit_results", "{}")
            return AgentTurn(f"{self.spec.name} finished; submitting.", [submit], finish_reason="cli")
        return AgentTurn(stop_message(self.spec.name, code, self.turn), [], finish_reason="cli", final=True)

    def drain_events(self) -> list[dict[str, Any]]:
        if self.turn != 1:
            return []
        text = self._read_log()
        events = LOG_PARSERS[self.spec.log_format](text) if text else []
        dropped = max(0, len(events) - MAX_EVENTS)
        events = events[:MAX_EVENTS]
        for i, event in enumerate(events):
            event.setdefault("call_id", f"cli_step_{i + 1:03d}")
        if dropped:
            events.append({"type": "note", "note": f"the {self.spec.name} log holds {dropped} more step(s) and "
                                                   f"message(s) past the first {MAX_EVENTS}: not recorded"})
        return events
