"""Replay a stored `trajectory.jsonl`: the same assistant turns and tool calls, no model.

Use it to re-score a run after a scorer or judge change, or to debug the harness. Paths the recorded run
saw (its data and workspace folders, from the `start` event) are rewritten to this run's, so a run made
under one sandbox replays under another. When a replayed call's exit code differs from the recorded one
the next turn says so in its text (and `divergences` counts it): replays are only as deterministic as
the code they re-run.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from automedbench.api import Agent, AgentContext, AgentTurn, ToolCall, UserError, read_events, torn_line
from automedbench.engine import RunFolder


class ReplayAgent(Agent):
    name = "replay"

    def __init__(self, trajectory: str = "", rewrite_paths: str = "true", allow_torn: str = "false") -> None:
        if not trajectory:
            raise UserError("the replay agent needs --agent-option trajectory=runs/<id>/trajectory.jsonl")
        path = Path(trajectory).expanduser()
        if path.is_dir():
            path = RunFolder(path).trajectory
        if not path.is_file():
            raise UserError(f"replay: {path}: no such trajectory")
        torn = torn_line(path)
        if torn is not None and str(allow_torn).lower() not in ("1", "true", "yes"):
            raise UserError(f"replay: {path}: line {torn} is not valid JSON (torn or edited); "
                            "--agent-option allow_torn=true replays the turns before it")
        events = read_events(path)
        self.turns = [e for e in events if e.get("type") == "assistant"]
        if not self.turns:
            raise UserError(f"replay: {path} holds no assistant turns")
        self.recorded_exit = {e["call_id"]: e.get("exit_code") for e in events
                              if e.get("type") == "tool" and e.get("call_id")}
        start = next((e for e in events if e.get("type") == "start"), {})
        self.old_paths = {k: start.get(k) for k in ("data_dir", "workspace_dir") if start.get(k)}
        self.rewrite = str(rewrite_paths).lower() not in ("0", "false", "no")
        self.new_paths: dict[str, str] = {}
        self.position = 0
        self.divergences = 0

    def start(self, context: AgentContext) -> None:
        self.new_paths = {"data_dir": context.data_dir, "workspace_dir": context.workspace_dir}

    def _rewrite(self, text: str) -> str:
        if not self.rewrite:
            return text
        pairs = [(old, self.new_paths[k]) for k, old in self.old_paths.items()
                 if k in self.new_paths and old != self.new_paths[k]]
        for old, new in sorted(pairs, key=lambda p: -len(p[0])):
            text = text.replace(old, new)
        return text

    def _check_last(self, messages: list[dict[str, Any]]) -> list[str]:
        notes = []
        for msg in reversed(messages):
            if msg.get("role") != "tool":
                break
            recorded = self.recorded_exit.get(msg.get("tool_call_id"))
            found = re.match(r"exit_code: (-?\d+)", msg.get("content") or "")
            if recorded is not None and found and int(found.group(1)) != recorded:
                self.divergences += 1
                notes.append(f"[replay: call {msg['tool_call_id']} exited {found.group(1)}, recorded {recorded}]")
        return notes

    def next_turn(self, messages: list[dict[str, Any]]) -> AgentTurn:
        notes = self._check_last(messages)
        if self.position >= len(self.turns):
            return AgentTurn("\n".join([*notes, "[replay: end of the recorded trajectory]"]), [], final=True)
        event = self.turns[self.position]
        self.position += 1
        calls = [ToolCall(c["id"], c["name"], self._rewrite(c.get("arguments") or ""))
                 for c in event.get("tool_calls", [])]
        content = "\n".join([*notes, event.get("content") or ""]).strip()
        return AgentTurn(content, calls, event.get("reasoning") or "", finish_reason="replay")
