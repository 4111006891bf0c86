"""Tool calls recovered from a reply's text, for open-weight models served without a tool-call parser.

Off by default (`--agent-option text_tool_calls=true`). Recognised, in this order:

- Hermes / Qwen: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (an unclosed last tag counts);
- Llama 3: `<|python_tag|>{"name": ..., "parameters": {...}}` (several separated by `;`), or raw Python
  after the tag (Llama's built-in code interpreter), taken as `execute_code` in Python;
- a fenced JSON block (```json … ```) holding an object with `name` and `arguments` (or `parameters`);
- failing all three, such an object (or a list of them) written bare at the start of a line outside any
  fence, for a call to one of `tools` only: prose around it is common, so the name must be an offered one.

Every object gets the repairs a structured call's arguments get (`repair_json`: raw line breaks and tabs
inside strings, trailing commas): a model writing code over several lines inside a JSON string is the rule,
not the exception, and was read as no call at all.

Small open-weight models often put the code in a Python triple-quoted string (three quote marks around it),
which is not JSON. With `tools` given, such an object is repaired (each triple-quoted string read as the Python
literal it is, by `ast.literal_eval` of that string alone) and taken when it then parses and names one of
`tools`; otherwise it stays unrecovered and the corrective message says JSON has no triple quotes.

Only the first `MAX_TEXT` characters are scanned, objects nested deeper than `MAX_DEPTH` or longer than
`MAX_OBJECT` are ignored and at most `MAX_CALLS` calls are taken per reply. A recovered call becomes an
ordinary ToolCall (id `text_N`) and meets the same checks as a structured one in the runner (known tool,
arguments a JSON object, required fields); `source` says which format it came from.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from attrs import define

from .chat_common import repair_json

MAX_TEXT = 200_000
MAX_OBJECT = 100_000
MAX_DEPTH = 16
MAX_CALLS = 8

_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.S)
_PYTHON_TAG = re.compile(r"<\|python_tag\|>(.*?)(?:<\|eom_id\|>|<\|eot_id\|>|\Z)", re.S)
_FENCE = re.compile(r"```(?:json|JSON|tool_call)?[ \t]*\n(.*?)\n?```", re.S)
_TRIPLE = re.compile(r'("""|\'\'\')(.*?)\1', re.S)
_ANY_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)  # any fenced block, an unclosed last one to the end
_LINE_OBJECT = re.compile(r"^[ \t]*[{\[]", re.M)  # an object (or list) opened at the start of a line
_TOKEN = re.compile(r'"(?:[^"\\]|\\.?)*"?|[{}\[\]]', re.S)  # a JSON string (escapes kept inside) or a bracket
MAX_BARE_TRIES = 2 * MAX_CALLS  # line-start objects examined per reply


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
        value = json.loads(repair_json(text))  # what JSON refuses is given the structured calls' repairs
    except (ValueError, RecursionError):  # ValueError: JSON's, or a number past Python's int-digit limit
        return None
    return value if _depth(value) <= MAX_DEPTH else None


def _triple_repaired(text: str) -> Any:
    """`text` with each Python triple-quoted string turned into a JSON string, loaded; None when that fails."""
    if len(text) > MAX_OBJECT or ('"""' not in text and "'''" not in text):
        return None

    def as_json(match: re.Match[str]) -> str:
        try:
            value = ast.literal_eval(match.group(0))  # a string literal alone: no names, no calls
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            value = match.group(2)  # an escape Python refuses: the characters as written
        return json.dumps(value if isinstance(value, str) else match.group(2))

    return _load(_TRIPLE.sub(as_json, text))


def _as_call(value: Any, source: str) -> TextCall | None:
    """An object with a string `name` and object `arguments`/`parameters` (or JSON text of one)."""
    if not isinstance(value, dict) or not isinstance(value.get("name"), str) or not value["name"].strip():
        return None
    args = value.get("arguments", value.get("parameters", {}))
    if isinstance(args, str):  # some models send the arguments JSON-encoded, as the wire format does
        args = _load(args) if args.strip() else {}
    if not isinstance(args, dict):
        return None
    if "arguments" not in value and args.get("type") == "object" and isinstance(args.get("properties"), dict):
        return None  # a tool's schema echoed back (name, description, parameters), not a call
    return TextCall(value["name"].strip(), json.dumps(args), source)


def _objects(text: str) -> list[Any]:
    """One JSON object or a list of them (Hermes allows either inside one tag)."""
    value = _load(text)
    return value if isinstance(value, list) else [value]


def _fenced(body: str, tools: frozenset[str], where: str = "fenced") -> list[TextCall]:
    """The calls in one block's body; `where` ("fenced" or "bare") names the shape in each call's source."""
    calls = [c for c in (_as_call(v, f"{where}_json") for v in _objects(body)) if c]
    if calls or not tools:
        return calls
    repaired = _triple_repaired(body)
    found = [_as_call(v, f"{where}_json_triple_quotes")
             for v in (repaired if isinstance(repaired, list) else [repaired])]
    return [c for c in found if c and c.name in tools]


def _balanced(text: str, start: int) -> int | None:
    """The end of the object or list opened at `text[start]`, or None when it does not close within
    `MAX_OBJECT` characters. Strings are single tokens (an unclosed one runs to the end), so one linear pass."""
    depth = 0
    for token in _TOKEN.finditer(text, start, min(len(text), start + MAX_OBJECT)):
        bracket = token.group()
        if bracket in ("{", "["):
            depth += 1
        elif bracket in ("}", "]"):
            depth -= 1
            if depth == 0:
                return token.end()
    return None


def bare_objects(text: str, limit: int = MAX_BARE_TRIES) -> list[str]:
    """The JSON-looking objects (or lists) opened at the start of a line outside fenced blocks, as text: at most
    `limit` line starts are examined, each at most `MAX_OBJECT` characters."""
    text = _ANY_FENCE.sub("\n", text[:MAX_TEXT])
    found: list[str] = []
    position = 0
    for tries, match in enumerate(_LINE_OBJECT.finditer(text)):
        if tries >= limit:
            break
        start = match.end() - 1
        if start < position:
            continue  # inside an object already read
        end = _balanced(text, start)
        if end is not None:
            found.append(text[start:end])
            position = end
    return found


def _bare(text: str, tools: frozenset[str]) -> list[TextCall]:
    """Calls to offered tools written as JSON at the start of a line, outside fenced blocks."""
    return [c for body in bare_objects(text) for c in _fenced(body, tools, "bare") if c.name in tools]


def find_text_calls(text: str, tools: frozenset[str] = frozenset()) -> list[TextCall]:
    """The tool calls written in `text`, in the first format that yields any (empty if none); `tools` (the
    names offered) turns on the triple-quote repair of fenced blocks and bare objects, for calls to those
    tools only."""
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
            calls += _fenced(body, tools)
        if not calls and tools:
            calls = _bare(text, tools)
    return calls[:MAX_CALLS]
