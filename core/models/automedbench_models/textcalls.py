"""Tool calls recovered from a reply's text, for open-weight models served without a tool-call parser.

Off by default (`--agent-option text_tool_calls=true`). Recognised, in this order:

- Hermes / Qwen: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (an unclosed last tag counts);
- Llama 3: `<|python_tag|>{"name": ..., "parameters": {...}}` (several separated by `;`), or raw Python
  after the tag (Llama's built-in code interpreter), taken as `execute_code` in Python;
- a fenced JSON block (```json … ```) holding an object with `name` and `arguments` (or `parameters`).

Only the first `MAX_TEXT` characters are scanned, objects nested deeper than `MAX_DEPTH` or longer than
`MAX_OBJECT` are ignored and at most `MAX_CALLS` calls are taken per reply. A recovered call becomes an
ordinary ToolCall (id `text_N`) and meets the same checks as a structured one in the runner (known tool,
arguments a JSON object, required fields); `source` says which format it came from.
"""

from __future__ import annotations

import json
import re
from typing import Any

from attrs import define

MAX_TEXT = 200_000
MAX_OBJECT = 100_000
MAX_DEPTH = 16
MAX_CALLS = 8

_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.S)
_PYTHON_TAG = re.compile(r"<\|python_tag\|>(.*?)(?:<\|eom_id\|>|<\|eot_id\|>|\Z)", re.S)
_FENCE = re.compile(r"```(?:json|JSON|tool_call)?[ \t]*\n(.*?)\n?```", re.S)


@define
class TextCall:
    """One call found in text: the tool name, its arguments as JSON text, and the format it came in."""

    name: str
    arguments: str
    source: str


def _depth(value: Any, level: int = 0) -> int:
    if level > MAX_DEPTH:
        return level
    if isinstance(value, dict):
        return max([_depth(v, level + 1) for v in value.values()], default=level + 1)
    if isinstance(value, list):
        return max([_depth(v, level + 1) for v in value], default=level + 1)
    return level


def _load(text: str) -> Any:
    """A JSON value from `text`, or None when it is too long, too deep or not JSON."""
    text = text.strip()
    if not text or len(text) > MAX_OBJECT:
        return None
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None
    return value if _depth(value) <= MAX_DEPTH else None


def _as_call(value: Any, source: str) -> TextCall | None:
    """An object with a string `name` and object `arguments`/`parameters` (or JSON text of one)."""
    if not isinstance(value, dict) or not isinstance(value.get("name"), str) or not value["name"].strip():
        return None
    args = value.get("arguments", value.get("parameters", {}))
    if isinstance(args, str):  # some models send the arguments JSON-encoded, as the wire format does
        args = _load(args) if args.strip() else {}
    if not isinstance(args, dict):
        return None
    return TextCall(value["name"].strip(), json.dumps(args), source)


def _objects(text: str) -> list[Any]:
    """One JSON object or a list of them (Hermes allows either inside one tag)."""
    value = _load(text)
    return value if isinstance(value, list) else [value]


def find_text_calls(text: str) -> list[TextCall]:
    """The tool calls written in `text`, in the first format that yields any (empty if none)."""
    text = (text or "")[:MAX_TEXT]
    calls: list[TextCall] = []
    if "<tool_call>" in text:
        for body in _HERMES.findall(text):
            calls += [c for c in (_as_call(v, "hermes") for v in _objects(body)) if c]
    elif "<|python_tag|>" in text:
        for body in _PYTHON_TAG.findall(text):
            whole = _as_call(_load(body), "python_tag")
            parts = [whole] if whole else [_as_call(_load(p), "python_tag") for p in re.split(r";\s*(?=\{)", body)]
            found = [c for c in parts if c]
            if not found and body.strip() and not body.lstrip().startswith("{"):
                found = [TextCall("execute_code", json.dumps({"language": "python", "code": body.strip()}),
                                  "python_tag")]
            calls += found
    else:
        for body in _FENCE.findall(text):
            calls += [c for c in (_as_call(v, "fenced_json") for v in _objects(body)) if c]
    return calls[:MAX_CALLS]
