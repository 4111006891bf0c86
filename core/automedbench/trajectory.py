"""The append-only trajectory: one JSON line per event, flushed as it happens.

Tool output is kept whole on disk (up to the sandbox's per-call cap) but long streams go to side files
under `tool_output/` so that `trajectory.jsonl` stays small and streamable; the model sees only tails.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .errors import AgentError
from .fsutil import encode_text
from .serialize import json_line

INLINE_LIMIT = 16_000
# Side files of one run together, in bytes (reserved with the run's disk, as the trajectory): past this, long streams
# keep only their inline head and tail.
SIDE_BUDGET_BYTES = 64 << 20
# What the agent phase may write into trajectory.jsonl (its replies and what they caused, the side files' streams
# apart; a long run's is a few MB): the run folder is on the host's disk, outside the agent's quota, so past this
# the run is the agent's failure, and the run's disk reservation holds this much. Six replies of 20 MB of code each
# filled a 160 MB disk, and the run ended an infrastructure failure blamed on "another process on the host".
MAX_AGENT_PHASE_BYTES = 128 << 20
MODEL_STDOUT_TAIL = 3000
MODEL_STDERR_TAIL = 2000


def tail(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"[... {len(text) - limit} characters omitted ...]\n" + text[-limit:]


class TrajectoryWriter:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.side = path.parent / "tool_output"
        # unbuffered bytes: a failed write (full disk) is cut back, so the file is always whole lines
        self._handle = path.open("ab", buffering=0)
        self.size = self._handle.seek(0, os.SEEK_END)
        self._t0 = time.monotonic()
        self.side_bytes = 0
        # a running hash of every byte this writer appended: what the harness wrote, to compare the file with
        self.digest = hashlib.sha256()
        self.ended = False  # the closing {"type": "end"} event is written

    def elapsed(self) -> float:
        return round(time.monotonic() - self._t0, 3)

    def write(self, event: dict[str, Any], streams: dict[str, str] | None = None, limit: int | None = None) -> None:
        """Append one event as a line (fsynced); `streams` (a tool call's stdout and stderr) go in as fields,
        the long ones spilled to side files (`stream_field`). `limit`: the file's size this event may not pass
        (AgentError, nothing written: the agent phase's events are the agent's doing)."""
        for name, text in (streams or {}).items():  # an observed step may name no call: its side file says "step"
            event = {**event, **self.stream_field(event.get("turn", 0), str(event.get("call_id") or "step"), name,
                                                  text)}
        event = {"t": self.elapsed(), **event}
        # lone surrogates (agent text decoded from JSON escapes) are written as visible \udXXX text, not a crash
        data = json_line(event)
        if limit is not None and self.size + len(data) > limit:
            raise AgentError(f"the agent's turns passed the {limit >> 20} MB the trajectory may hold (an event of "
                             f"{len(data)} bytes after {self.size})")
        fd = self._handle.fileno()
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, self.size)
            raise
        self.size += len(data)
        self.digest.update(data)
        self.ended = self.ended or event.get("type") == "end"

    def write_all(self, events: Iterable[tuple[dict[str, Any], dict[str, str]]], limit: int | None = None) -> None:
        """Append each (event, streams) as it comes (`write`): a crash keeps every event written so far."""
        for event, streams in events:
            self.write(event, streams, limit)

    def stream_field(self, turn: int, call_id: str, name: str, text: str) -> dict[str, Any]:
        """Inline short streams; spill long ones to a side file and keep a pointer."""
        if len(text) <= INLINE_LIMIT:
            return {name: text}
        short = {name: text[:2000] + "\n[...]\n" + text[-4000:], f"{name}_chars": len(text)}
        data = encode_text(text)
        if self.side_bytes + len(data) > SIDE_BUDGET_BYTES:  # harness files must not grow without bound
            return {**short, f"{name}_file": None}
        self.side_bytes += len(data)
        self.side.mkdir(exist_ok=True)
        # the call id comes from the model: only safe characters, bounded, and never overwriting
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", call_id)[:64].lstrip(".") or "call"
        side = self.side / f"turn{turn:04d}_{safe}_{name}.txt"
        n = 1
        while side.exists():
            n += 1
            side = self.side / f"turn{turn:04d}_{safe}_{name}.{n}.txt"
        side.write_bytes(data)
        return {**short, f"{name}_file": str(side.relative_to(self.path.parent))}

    def close(self) -> None:
        if not self._handle.closed:
            self._handle.close()


def read_events(path: Path) -> list[dict[str, Any]]:
    """Read a trajectory, tolerating a torn last line from a crash."""
    events = []
    if not path.exists():
        return events
    # split on "\n" only: json.dumps leaves U+2028, U+2029 and U+0085 unescaped inside strings, and
    # str.splitlines() would cut a line at any of them that an agent printed
    for line in path.read_text(encoding="utf-8").split("\n"):
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return events


def torn_line(path: Path) -> int | None:
    """The number of the first non-empty line that is not JSON (where `read_events` stops), else None."""
    if not path.exists():
        return None
    # "\n" only, as read_events: U+2028 or U+0085 an agent printed sits raw inside a JSON string
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        if line.strip():
            try:
                json.loads(line)
            except json.JSONDecodeError:
                return number
    return None
