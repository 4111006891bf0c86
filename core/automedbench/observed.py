"""Steps an agent's own program took inside one long sandbox call, as the harness observed them.

An installed agent system (Claude Code, Codex, ...) runs its whole session as ONE sandbox call, so the runner
cannot wrap each of its steps as it wraps a chat agent's calls. Something the harness runs outside the sandbox
can still see them: the model gateway sees the model ask for each step in a reply and the program answer it in
its next request. The agent hands each such step to this recorder (`AgentContext.steps`) the moment its answer
arrives, while the program waits for the model and runs nothing; the recorder then does what the runner does
around a chat agent's call: it looks at `outputs/` itself (the same no-follow walk), records which cases changed
and how many have outputs, and lets the pilot tracker copy a one-case output out as a pilot candidate. The
runner writes these events as its own (not `imported`), so the judges, the pilot checks, the error codes and the
run page read them exactly as a chat agent's turns. What the program's own transcript says is never recorded
here: a transcript lives in the workspace, where the agent can rewrite it.

The outputs are seen between replies, not between the steps of one reply: a reply's steps share one look, and
the cases that changed are put on its last successful step.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .fsutil import open_dir, printable, walk_fd
from .pilot import PilotTracker

MAX_STEPS = 5_000  # steps recorded per run (the trace examines as many calls); later ones are counted only
MAX_STEPS_PER_REPLY = 32  # as a chat agent's reply (conversation.MAX_CALLS_PER_REPLY)
MAX_FIELD_CHARS = 1 << 20  # code, text and reasoning kept per field (streams go to side files past 16 000)


def outputs_snapshot(root: Path, max_entries: int = 50_000) -> dict[str, tuple[int, int]]:
    """Size and mtime of every file under outputs/, keyed by a printable relative path.

    Walked through no-follow descriptors (a symlinked outputs/ or sub-folder is never followed), bounded in
    depth and entries, and names that are not UTF-8 are shown with backslash escapes.
    """
    fd = open_dir(root)
    if fd is None:
        return {}
    snap = {}
    try:
        for rel, dir_fd, _name, info in walk_fd(fd, max_entries=max_entries):
            if dir_fd < 0 or info is None:
                continue
            snap[printable(rel)] = (info.st_size, info.st_mtime_ns)
    finally:
        os.close(fd)
    return snap


def outputs_change(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]],
                   case_ids: set[str]) -> tuple[list[str], int]:
    """(top-level entries that are new or changed, how many of the task's case folders exist with anything in
    them or not) from one snapshot to the next: what a chat agent's call is recorded with."""
    changed = {p.split("/", 1)[0] for p, meta in after.items() if before.get(p) != meta}
    cases = {p.split("/", 1)[0] for p in after} & case_ids
    return sorted(changed)[:200], len(cases)


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else ""
    if len(text) <= MAX_FIELD_CHARS:
        return text
    return text[:MAX_FIELD_CHARS // 4] + f"\n[... {len(text) - MAX_FIELD_CHARS} characters left out ...]\n" + \
        text[-(MAX_FIELD_CHARS - MAX_FIELD_CHARS // 4):]


class ObservedSteps:
    """The recorder one run gives its agent (`AgentContext.steps`); thread-safe (the gateway answers requests on
    threads of its own). `reply` records a model reply (a turn), `steps` the answered steps of one reply with a
    look at the outputs taken now; `drain` hands the runner what was recorded since it last asked."""

    def __init__(self, outputs: Path, case_ids: list[str], pilots: PilotTracker | None = None,
                 progress: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.outputs, self.case_ids, self.pilots = outputs, set(case_ids), pilots
        self.progress = progress or (lambda event: None)
        self.lock = threading.Lock()
        self.events: list[dict[str, Any]] = []
        self.last = outputs_snapshot(outputs)
        self.last_at = time.monotonic()
        self.recorded = 0  # steps recorded over the run
        self.left_out = 0  # steps past MAX_STEPS, counted only
        self.model_s = 0.0  # model time the replies took (inside the sandbox call's duration)

    def reply(self, turn: int, content: str = "", reasoning: str = "", tool_calls: list[dict[str, str]] | None = None,
              *, tokens_in: int = 0, tokens_out: int = 0, tokens_cached: int = 0, cost_usd: float = 0.0,
              latency_s: float = 0.0, source: str = "gateway") -> None:
        """One model reply, numbered `turn` (the model's replies in order from the session's first turn)."""
        calls = [{"id": _text(c.get("id"))[:200], "name": "execute_code", "tool": _text(c.get("tool"))[:100],
                  "arguments": _text(c.get("arguments"))} for c in (tool_calls or [])[:MAX_STEPS_PER_REPLY]]
        with self.lock:
            self.model_s += max(0.0, float(latency_s))
            self.events.append({"type": "assistant", "turn": int(turn), "content": _text(content),
                                "reasoning": _text(reasoning), "tool_calls": calls, "tokens_in": int(tokens_in),
                                "tokens_out": int(tokens_out), "tokens_cached": int(tokens_cached),
                                "cost_usd": float(cost_usd), "finish_reason": "tool_calls" if calls else "stop",
                                "latency_s": round(float(latency_s), 3), "observed_by": source})
        self._tell({"kind": "turn", "turn": int(turn), "content": _text(content)[:2000], "tools": ["execute_code"] *
                    len(calls)})

    def steps(self, turn: int, steps: list[dict[str, Any]], source: str = "gateway") -> list[dict[str, Any]]:
        """The answered steps of reply `turn`, each {call_id, tool, language, code, exit_code, stdout, stderr}; the
        outputs are looked at now (the program is waiting for the model). Returns the recorded events (the caller
        may mark one `disputed` later: a second, different answer to the same call)."""
        with self.lock:
            after = outputs_snapshot(self.outputs)
            now = time.monotonic()
            changed, cases = outputs_change(self.last, after, self.case_ids)
            self.last, took, self.last_at = after, now - self.last_at, now
            kept = steps[:MAX_STEPS_PER_REPLY][:max(0, MAX_STEPS - self.recorded)]
            self.left_out += len(steps) - len(kept)
            if not kept:
                return []
            ok = [i for i, s in enumerate(kept) if s.get("exit_code") == 0]
            owner = ok[-1] if ok else len(kept) - 1  # the step the outputs' change is put on
            events = []
            for index, step in enumerate(kept):
                code = step.get("exit_code")
                events.append({
                    "type": "tool", "turn": int(turn), "call_id": _text(step.get("call_id"))[:200],
                    "name": "execute_code", "tool": _text(step.get("tool"))[:100],
                    "language": step.get("language") if step.get("language") in ("python", "bash") else "bash",
                    "code": _text(step.get("code")),
                    "exit_code": code if type(code) is int else None, "timed_out": False,
                    "duration_s": round(took, 3) if index == owner else 0.0,
                    "stdout": _text(step.get("stdout")), "stderr": _text(step.get("stderr")),
                    "changed_cases": changed if index == owner else [], "cases_with_outputs": cases,
                    "observed_by": source})
            self.recorded += len(events)
            self.events.extend(events)
            if self.pilots is not None:
                for event in events:  # a one-case output is copied now, contract-checked after the run
                    self.pilots.note(event)
        for event in events:
            self._tell({"kind": "tool", "turn": event["turn"], "name": "execute_code", "observed": True,
                        "exit_code": event["exit_code"], "duration_s": event["duration_s"]})
        return events

    def _tell(self, event: dict[str, Any]) -> None:
        with contextlib.suppress(Exception):  # progress is for the person watching; it never stops a run
            self.progress(event)

    def model_time(self, seconds: float) -> None:
        """Model time spent outside any recorded reply (a refused or failed call): time the agent waited."""
        with self.lock:
            self.model_s += max(0.0, float(seconds))

    def drain(self) -> list[dict[str, Any]]:
        """What was recorded since the last call, in order; and a note when the outputs changed after the last
        answered step (a step whose answer never came back, or a process left running)."""
        with self.lock:
            events, self.events = self.events, []
            if events or self.recorded:
                now = outputs_snapshot(self.outputs)
                changed, _cases = outputs_change(self.last, now, self.case_ids)
                self.last = now
                if changed:
                    events.append({"type": "note", "note": f"outputs of {len(changed)} case folder(s) changed "
                                   "after the last step the harness saw answered (not attributed to any step): "
                                   + ", ".join(changed[:10])})
            if self.left_out:
                events.append({"type": "note", "note": f"{self.left_out} steps past the first {MAX_STEPS} (or past "
                               f"{MAX_STEPS_PER_REPLY} in one reply) were counted, not recorded"})
                self.left_out = 0
            return events
