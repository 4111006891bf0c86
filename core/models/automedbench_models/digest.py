"""The per-turn trajectory digest an LLM judge reads.

Everything the agent controls is kept apart from the lines the harness writes: multi-line agent text
(messages, code, output) is indented with `  | ` on every line, so no agent line can start at the left
margin where the harness's own `## Turn` and `[tool ...]` lines are; single values the agent chose
(folder names, tool names, a CLI log's exit codes) are JSON-quoted on one line. Steps a CLI agent
reported in its own log are marked self-reported: the harness never observed them.

When the digest is too long, no turn can crowd out the others: each turn's block is bounded, turns
with failures are expanded first, and every omitted turn is still named in a summary line saying what
was cut (calls, exit codes), so failed middle turns cannot be hidden by padding the first and last.
"""

from __future__ import annotations

import json
import re
from typing import Any

from automedbench.api import quote_line

DIGEST_CHARS = 60_000
TURN_CHARS = 6_000
RANGE_CHARS = 120
MARGIN = "  | "
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def clip(text: str, limit: int) -> str:
    text = text or ""
    if len(text) <= limit:
        return text
    head = limit // 3
    return text[:head] + f"\n[... {len(text) - limit} characters omitted ...]\n" + text[-(limit - head):]


def clip_lines(text: str, limit: int) -> str:
    """Like `clip`, but cutting only between lines, so a cut never leaves agent text at the left margin."""
    if len(text) <= limit:
        return text
    lines = text.split("\n")
    head: list[str] = []
    tail: list[str] = []
    used, i, j = 0, 0, len(lines) - 1
    while i <= j and used + len(lines[i]) + 1 <= limit // 3:
        used += len(lines[i]) + 1
        head.append(lines[i])
        i += 1
    while j >= i and used + len(lines[j]) + 1 <= limit - 80:
        used += len(lines[j]) + 1
        tail.insert(0, lines[j])
        j -= 1
    cut = sum(len(x) + 1 for x in lines[i:j + 1])
    return "\n".join([*head, f"[... {j - i + 1} line(s), {cut} characters of this turn omitted ...]", *tail])


def indented(text: Any, limit: int) -> str:
    """Agent text, clipped, every line (whatever the line break) behind the margin; control bytes escaped."""
    body = clip(text if isinstance(text, str) else json.dumps(text), limit)
    lines = body.splitlines() or [""]
    return "\n".join(MARGIN + _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", line) for line in lines)


def _exit(event: dict[str, Any]) -> str:
    code = event.get("exit_code")
    if event.get("imported"):
        shown = code if isinstance(code, int) and not isinstance(code, bool) else quote_line(code, 20)
        return f"exit {shown} (self-reported by the CLI log, not observed by the harness)"
    if event.get("observed_by"):  # a step inside an installed agent's session, seen at the model gateway
        shown = "unknown" if code is None else code
        return f"exit {shown} (as the program answered its model; outputs looked at by the harness)" + (
            " (disputed: answered twice, differently)" if event.get("disputed") else "")
    return f"exit {code}" + (" (timed out)" if event.get("timed_out") else "")


def failed(event: dict[str, Any]) -> bool:
    """A turn event that shows something went wrong (the digest never elides these first)."""
    if event.get("type") == "breach":
        return True
    if event.get("type") != "tool":
        return False
    return bool(event.get("error")) or event.get("timed_out") is True or (
        event.get("name") == "execute_code" and event.get("exit_code") != 0)


def event_text(event: dict[str, Any]) -> str:
    kind = event.get("type")
    if kind == "assistant":
        calls = ", ".join(quote_line(c.get("name", ""), 60) for c in event.get("tool_calls", [])[:20])
        return f"[agent message] (tool calls: {calls or 'none'})\n{indented(event.get('content') or '', 800)}"
    if kind == "cli_message":
        return f"[agent message, from its CLI log]\n{indented(event.get('content') or '', 800)}"
    if kind == "tool":
        source = "CLI step, self-reported" if event.get("imported") else "program step" if event.get(
            "observed_by") else "tool"
        name = event.get("name")
        if event.get("session"):  # the whole program ran in this call; its steps are the turns that follow
            return (f"[agent program session] {_exit(event)}; the program's own steps are listed as turns; "
                    f"the session's last output:\n{indented(event.get('stdout') or '', 400)}")
        if name == "submit_results":
            return f"[{source} submit_results] {quote_line(json.dumps(event.get('result', {})), 400)}"
        if event.get("error"):
            return f"[{source} {quote_line(name, 60)}] rejected: {quote_line(event['error'], 120)}"
        outputs = ""
        if "cases_with_outputs" in event:
            changed = ", ".join(quote_line(c, 80) for c in event.get("changed_cases", [])[:10])
            outputs = f"; cases with outputs afterwards: {int(event['cases_with_outputs'])}" + (
                f" (changed: {changed})" if changed else "")
        check = event.get("pilot_check")
        if isinstance(check, dict) and not event.get("imported"):
            reasons = quote_line("; ".join(str(r) for r in check.get("reasons", [])), 300)
            verdict = "passed" if check.get("valid") else f"FAILED: {reasons}"
            case = quote_line(check.get("case", ""), 80)
            outputs += f"\n[harness] contract check of case {case} after this call: {verdict}"
        return (f"[{source} execute_code {quote_line(event.get('language', ''), 20)}] {_exit(event)}{outputs}\n"
                f"code:\n{indented(event.get('code') or '', 1500)}\n"
                f"stdout (tail):\n{indented(event.get('stdout') or '', 800)}\n"
                f"stderr (tail):\n{indented(event.get('stderr') or '', 400)}")
    if kind == "breach":
        return "[harness] read of held-out references detected"
    return ""


def with_pilot_checks(events: list[dict[str, Any]], checks: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The events with the harness's pilot verdicts (from `pilot_checks.json`) on the calls they concern;
    a `pilot_check` key that came from anywhere else is dropped."""
    by_call = {(c.get("turn"), c.get("call_id")): c for c in checks or []}
    out = []
    for event in events:
        event = {k: v for k, v in event.items() if k != "pilot_check"}
        check = by_call.get((event.get("turn"), event.get("call_id")))
        if check is not None and event.get("type") == "tool" and not event.get("imported"):
            event["pilot_check"] = check
        out.append(event)
    return out


def _summary(turn: int, events: list[dict[str, Any]]) -> str:
    calls = [e for e in events if e.get("type") == "tool"]
    codes = [_exit(e).split(" (")[0].removeprefix("exit ") if e.get("name") == "execute_code"
             else ("rejected" if e.get("error") else str(e.get("name"))[:20]) for e in calls]
    mark = "FAILED " if any(failed(e) for e in events) else ""
    shown = ", ".join(codes[:12]) + (f", ... ({len(codes) - 12} more)" if len(codes) > 12 else "")
    return f"[... {mark}turn {turn} omitted for length: {len(calls)} call(s): {quote_line(shown, 200)} ...]"


def _range_line(turns: list[int], counts: list[int]) -> str:
    span = f"turn {turns[0]}" if len(turns) == 1 else f"turns {turns[0]}-{turns[-1]}"
    return (f"[... {len(turns)} turn(s) omitted for length ({span}): {sum(counts)} call(s), "
            "none failed ...]")


def digest(events: list[dict[str, Any]], limit: int = DIGEST_CHARS) -> tuple[str, int]:
    """Per-turn text blocks within `limit` characters; (text, the last turn number)."""
    by_turn: dict[int, list[dict[str, Any]]] = {}
    for event in events:
        turn = event.get("turn")
        if isinstance(turn, int) and not isinstance(turn, bool) and event_text(event):
            by_turn.setdefault(turn, []).append(event)
    turns = sorted(by_turn)
    max_turn = turns[-1] if turns else 0
    full = {t: clip_lines(f"## Turn {t}\n" + "\n".join(event_text(e) for e in by_turn[t]), TURN_CHARS) for t in turns}
    if sum(len(b) + 2 for b in full.values()) <= limit:
        return "\n\n".join(full[t] for t in turns) or "(the agent took no turns)", max_turn
    bad = {t for t in turns if any(failed(e) for e in by_turn[t])}
    # what every turn costs when it is not shown in full: failed turns a line each, others a shared range
    line = {t: _summary(t, by_turn[t]) for t in bad}
    # each gap between kept turns becomes one range line of at most RANGE_CHARS
    used = sum(len(v) + 2 for v in line.values()) + RANGE_CHARS * (len(bad) + 1)
    shown: set[int] = set()
    ends = [x for pair in zip(turns, reversed(turns), strict=True) for x in pair]
    for t in [*sorted(bad), *dict.fromkeys(ends)]:
        if t in shown:
            continue
        cost = len(full[t]) + 2 - (len(line[t]) + 2 if t in bad else 0) + (0 if t in bad else RANGE_CHARS)
        if used + cost <= limit:
            shown.add(t)
            used += cost
    parts: list[str] = []
    run: list[int] = []
    for t in [*turns, None]:
        if t is not None and t not in shown and t not in bad:
            run.append(t)
            continue
        if run:
            parts.append(_range_line(run, [sum(e.get("type") == "tool" for e in by_turn[r]) for r in run]))
            run = []
        if t is not None:
            parts.append(full[t] if t in shown else line[t])
    return "\n\n".join(parts), max_turn
