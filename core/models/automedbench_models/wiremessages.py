"""What the model gateway reads on the wire: a model's reply (its text, reasoning and tool calls) and the end of the
next request (the reply as the program sent it back, then the program's answers to its calls).

Four wire formats, streamed (server-sent events) or whole: the Anthropic messages API, OpenAI chat completions, the
OpenAI responses API and the Gemini API; and a text mode for programs whose model writes its command in a fenced
block instead of a tool call (mini-swe-agent's text-based configuration). Everything read here is bounded and
never raises on bad input: a body that is not what its format says reads as nothing.
"""

from __future__ import annotations

import json
import re
from typing import Any

from attrs import Factory, define

MAX_PARSED_BYTES = 16 << 20  # a longer request or reply is not read for steps (the gateway notes it)
# objects and arrays one parse may make: each is a Python object in the harness's own process (no memory limit), and
# 64 MB of `{},` were 22 million dicts, 1.7 GB; this many take ~100 MB, far above any real request or reply
MAX_PARSED_CONTAINERS = 1_000_000
MAX_CALLS = 64  # tool calls read per reply
MAX_TEXT = 200_000  # characters kept of a reply's text or reasoning, or one answer
# mini-swe-agent's text-based action (its `action_regex`): exactly one such block is a command
TEXT_ACTION = re.compile(r"```mswea_bash_command\s*\n(.*?)\n```", re.S)


@define
class WireCall:
    """One tool call as the model made it: id (may be empty), tool name, its arguments as sent and as parsed."""

    id: str
    name: str
    arguments: str
    args: dict[str, Any] = Factory(dict)
    kind: str = "function"  # "custom" for a free-form tool (Codex's apply_patch), "text" for a fenced command

    def fingerprint(self) -> tuple[str, str]:
        """What identifies the call when the program sends it back (ids may be missing or rewritten)."""
        canon = json.dumps(self.args, sort_keys=True, ensure_ascii=False) if self.args else self.arguments.strip()
        return self.name, canon


@define
class WireReply:
    """A model reply: text, reasoning and tool calls."""

    content: str = ""
    reasoning: str = ""
    calls: list[WireCall] = Factory(list)


@define
class WireAnswer:
    """The program's answer to one call, as its next request carries it."""

    id: str
    name: str
    text: str
    is_error: bool = False


@define
class WireTail:
    """The end of a request: its last model turn (as the program sent it back) and the answers after it."""

    reply: WireReply
    answers: list[WireAnswer]


# ------------------------------------------------------------------ small readers


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _cap(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT // 4] + "\n[...]\n" + text[-(MAX_TEXT * 3 // 4):]


def too_large(data: bytes | str, max_bytes: int = MAX_PARSED_BYTES, max_items: int | None = None) -> bool:
    """Whether parsing `data` could cost the harness more than it allows: longer than `max_bytes`, or more than
    MAX_PARSED_CONTAINERS `{` and `[` (an upper bound on the objects and arrays, counted before anything is made),
    or, given `max_items`, more `{`, `[` and `,` than that (an upper bound on every value the parse makes: what a
    body longer than MAX_PARSED_BYTES may hold is long strings, not millions of small values)."""
    if len(data) > max_bytes:
        return True

    def count(mark: str) -> int:
        return data.count(mark.encode()) if isinstance(data, bytes) else data.count(mark)

    containers = count("{") + count("[")
    if containers > MAX_PARSED_CONTAINERS:
        return True
    return max_items is not None and containers + count(",") > max_items


def parse_bounded(data: bytes | str, max_bytes: int = MAX_PARSED_BYTES, max_items: int | None = None) -> Any:
    """`data` as JSON, or None when it is not JSON or `too_large`. Every body the sandbox or the provider sends the
    gateway, and every transcript a program wrote, is parsed through this (in the harness's own process), never
    `json.loads` itself."""
    if too_large(data, max_bytes, max_items):
        return None
    try:
        return json.loads(data)
    except (ValueError, RecursionError, UnicodeDecodeError):
        return None


def _args(text: str) -> dict[str, Any]:
    parsed = parse_bounded(text) if text.strip() else {}
    return parsed if isinstance(parsed, dict) else {}


def content_text(value: Any) -> str:
    """Text of a content field: a string, or a list of parts with `text` (or `output`/`content` strings)."""
    if isinstance(value, str):
        return value
    parts = []
    for part in _list(value)[:1000]:
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict):
            parts.append(_str(part.get("text")) or _str(part.get("output")) or _str(part.get("content")))
    return "\n".join(p for p in parts if p)


def sse_data(body: bytes) -> list[Any] | None:
    """The JSON objects of a server-sent-event stream's `data:` lines, or None when the body is no stream."""
    head = body[:4096].lstrip()
    if not (head.startswith(b"data:") or head.startswith(b"event:") or b"\ndata:" in head):
        return None
    out = []
    for line in body.splitlines():
        if line.startswith(b"data:"):
            item = parse_bounded(line[5:].strip())
            if item is not None:
                out.append(item)
    return out


def text_actions(content: str) -> list[WireCall]:
    """The fenced command of a text-mode reply: exactly one block is one call (more or none: no call)."""
    found = TEXT_ACTION.findall(content[:MAX_TEXT])
    if len(found) != 1:
        return []
    command = found[0].strip()
    return [WireCall("", "bash", command, {"command": command}, "text")]


# ------------------------------------------------------------------ replies


def read_reply(wire: str, body: bytes, text_mode: bool = False) -> WireReply | None:
    """The model's reply in `body` (as the gateway forwarded it), or None when it cannot be read."""
    if too_large(body):
        return None
    events = sse_data(body)
    whole = parse_bounded(body) if events is None else None
    if events is None and whole is None:
        return None
    reader = {"anthropic": _anthropic_reply, "responses": _responses_reply, "gemini": _gemini_reply}.get(wire,
                                                                                                        _chat_reply)
    reply = reader(events, whole)
    if reply is None:
        return None
    reply.content, reply.reasoning = _cap(reply.content), _cap(reply.reasoning)
    reply.calls = reply.calls[:MAX_CALLS]
    if text_mode:
        reply.calls = text_actions(reply.content)
    return reply


def _anthropic_reply(events: list[Any] | None, whole: Any) -> WireReply | None:
    blocks: dict[int, dict[str, Any]] = {}
    if events is None:
        blocks = {i: dict(b) for i, b in enumerate(_list(_dict(whole).get("content"))) if isinstance(b, dict)}
        if not isinstance(_dict(whole).get("content"), list):
            return None
    else:
        for event in events:
            event = _dict(event)
            kind = event.get("type")
            index = event.get("index")
            if kind == "message_start":
                for i, block in enumerate(_list(_dict(event.get("message")).get("content"))):
                    if isinstance(block, dict):
                        blocks[i] = dict(block)
            elif kind == "content_block_start" and isinstance(index, int):
                blocks[index] = {**_dict(event.get("content_block")), "_json": ""}
            elif kind == "content_block_delta" and isinstance(index, int) and index in blocks:
                delta, block = _dict(event.get("delta")), blocks[index]
                if delta.get("type") == "text_delta":
                    block["text"] = _str(block.get("text")) + _str(delta.get("text"))
                elif delta.get("type") == "thinking_delta":
                    block["thinking"] = _str(block.get("thinking")) + _str(delta.get("thinking"))
                elif delta.get("type") == "input_json_delta":
                    block["_json"] = _str(block.get("_json")) + _str(delta.get("partial_json"))
    reply = WireReply()
    texts, thoughts = [], []
    for _index, block in sorted(blocks.items()):
        kind = block.get("type")
        if kind == "text":
            texts.append(_str(block.get("text")))
        elif kind in ("thinking", "redacted_thinking"):
            thoughts.append(_str(block.get("thinking")) or "[redacted thinking]")
        elif kind in ("tool_use", "server_tool_use"):
            raw = _str(block.get("_json"))
            args = _args(raw) if raw else _dict(block.get("input"))
            reply.calls.append(WireCall(_str(block.get("id")), _str(block.get("name")),
                                        raw or json.dumps(args), args))
    reply.content, reply.reasoning = "".join(texts), "\n".join(thoughts)
    return reply


def _chat_reply(events: list[Any] | None, whole: Any) -> WireReply | None:
    reply = WireReply()
    if events is None:
        choices = _list(_dict(whole).get("choices"))
        if not choices:
            return None
        message = _dict(_dict(choices[0]).get("message"))
        reply.content = content_text(message.get("content"))
        reply.reasoning = _str(message.get("reasoning_content")) or _str(message.get("reasoning"))
        for call in _list(message.get("tool_calls")):
            function = _dict(_dict(call).get("function"))
            raw = function.get("arguments")
            raw = raw if isinstance(raw, str) else json.dumps(raw) if isinstance(raw, dict) else ""
            reply.calls.append(WireCall(_str(_dict(call).get("id")), _str(function.get("name")), raw, _args(raw)))
        return reply
    texts, thoughts = [], []
    calls: dict[int, dict[str, str]] = {}
    for event in events:
        for choice in _list(_dict(event).get("choices"))[:1]:
            delta = _dict(_dict(choice).get("delta"))
            texts.append(_str(delta.get("content")))
            thoughts.append(_str(delta.get("reasoning_content")) or _str(delta.get("reasoning")))
            for part in _list(delta.get("tool_calls")):
                part = _dict(part)
                index = part.get("index") if isinstance(part.get("index"), int) else len(calls)
                slot = calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
                function = _dict(part.get("function"))
                slot["id"] = slot["id"] or _str(part.get("id"))
                slot["name"] = slot["name"] or _str(function.get("name"))
                arguments = function.get("arguments")
                slot["arguments"] += arguments if isinstance(arguments, str) else json.dumps(arguments) \
                    if isinstance(arguments, dict) else ""
    reply.content, reply.reasoning = "".join(texts), "".join(thoughts)
    reply.calls = [WireCall(c["id"], c["name"], c["arguments"], _args(c["arguments"]))
                   for _i, c in sorted(calls.items())]
    return reply


def _responses_items(events: list[Any] | None, whole: Any) -> list[Any] | None:
    if events is None:
        output = _dict(whole).get("output")
        return output if isinstance(output, list) else None
    done, completed = [], None
    for event in events:
        event = _dict(event)
        if event.get("type") == "response.output_item.done":
            done.append(event.get("item"))
        elif event.get("type") in ("response.completed", "response.incomplete"):
            output = _dict(event.get("response")).get("output")
            completed = output if isinstance(output, list) and output else completed
    return completed if completed is not None else done


def _responses_reply(events: list[Any] | None, whole: Any) -> WireReply | None:
    items = _responses_items(events, whole)
    if items is None:
        return None
    return _responses_turn([_dict(i) for i in items])


def _responses_turn(items: list[dict[str, Any]]) -> WireReply:
    reply = WireReply()
    texts, thoughts = [], []
    for item in items:
        kind = item.get("type")
        if kind == "message":
            texts.append(content_text(item.get("content")))
        elif kind == "reasoning":
            thoughts += [_str(_dict(s).get("text")) for s in _list(item.get("summary"))]
            thoughts += [_str(_dict(s).get("text")) for s in _list(item.get("content"))]
        elif kind == "function_call":
            raw = _str(item.get("arguments"))
            reply.calls.append(WireCall(_str(item.get("call_id")), _str(item.get("name")), raw, _args(raw)))
        elif kind == "custom_tool_call":
            raw = _str(item.get("input"))
            reply.calls.append(WireCall(_str(item.get("call_id")), _str(item.get("name")), raw, {"input": raw},
                                        "custom"))
        elif kind == "local_shell_call":
            action = _dict(item.get("action"))
            args = {"command": action.get("command")}
            reply.calls.append(WireCall(_str(item.get("call_id")), "local_shell", json.dumps(args), args))
    reply.content = "\n".join(t for t in texts if t)
    reply.reasoning = "\n".join(t for t in thoughts if t)
    return reply


def _gemini_reply(events: list[Any] | None, whole: Any) -> WireReply | None:
    chunks = events if events is not None else whole if isinstance(whole, list) else [whole]
    reply = WireReply()
    texts, thoughts, seen = [], [], False
    for chunk in chunks:
        for candidate in _list(_dict(chunk).get("candidates"))[:1]:
            seen = True
            for part in _list(_dict(_dict(candidate).get("content")).get("parts")):
                part = _dict(part)
                if "functionCall" in part:
                    call = _dict(part.get("functionCall"))
                    args = _dict(call.get("args"))
                    reply.calls.append(WireCall(_str(call.get("id")), _str(call.get("name")), json.dumps(args), args))
                elif part.get("thought"):
                    thoughts.append(_str(part.get("text")))
                else:
                    texts.append(_str(part.get("text")))
    if not seen:
        return None
    reply.content, reply.reasoning = "".join(texts), "".join(thoughts)
    return reply


# ------------------------------------------------------------------ the end of a request


def offers_tools(body: Any) -> bool:
    """Whether a request offers the model any tool (an agent's turn does; a side call for a title does not)."""
    return bool(_list(_dict(body).get("tools")))


def read_tail(wire: str, body: Any, text_mode: bool = False) -> WireTail | None:
    """The request's last model turn and the answers after it, or None (no model turn yet, or unreadable)."""
    body = _dict(body)
    if text_mode:
        return _text_tail(_list(body.get("messages")))
    reader = {"anthropic": _anthropic_tail, "responses": _responses_tail, "gemini": _gemini_tail}.get(wire,
                                                                                                      _chat_tail)
    return reader(body)


def _last_turn(items: list[Any], role: str) -> tuple[dict[str, Any], list[Any]] | None:
    """The last item with this `role` and the items after it, or None when there is none."""
    for index in range(len(items) - 1, -1, -1):
        if _dict(items[index]).get("role") == role:
            return items[index], items[index + 1:]
    return None


def _anthropic_tail(body: dict[str, Any]) -> WireTail | None:
    found = _last_turn(_list(body.get("messages")), "assistant")
    if found is None:
        return None
    turn, after = found
    content = turn.get("content")
    reply = _anthropic_reply(None, {"content": content if isinstance(content, list)
                                    else [{"type": "text", "text": _str(content)}]})
    answers = []
    for message in after:
        for block in _list(_dict(message).get("content")):
            block = _dict(block)
            if block.get("type") == "tool_result":
                answers.append(WireAnswer(_str(block.get("tool_use_id")), "", _cap(content_text(block.get("content"))),
                                          block.get("is_error") is True))
    return WireTail(reply or WireReply(), answers)


def _chat_tail(body: dict[str, Any]) -> WireTail | None:
    found = _last_turn(_list(body.get("messages")), "assistant")
    if found is None:
        return None
    turn, after = found
    reply = _chat_reply(None, {"choices": [{"message": turn}]}) or WireReply()
    answers = [WireAnswer(_str(_dict(m).get("tool_call_id")), _str(_dict(m).get("name")),
                          _cap(content_text(_dict(m).get("content"))))
               for m in after if _dict(m).get("role") == "tool"]
    return WireTail(reply, answers)


MODEL_ITEMS = ("message", "reasoning", "function_call", "custom_tool_call", "local_shell_call")
ANSWER_ITEMS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")


def _responses_tail(body: dict[str, Any]) -> WireTail | None:
    items = [_dict(i) for i in _list(body.get("input"))]
    end = len(items)
    while end > 0 and (items[end - 1].get("type") in ANSWER_ITEMS or (
            items[end - 1].get("type") == "message" and items[end - 1].get("role") != "assistant")):
        end -= 1
    start = end
    while start > 0 and items[start - 1].get("type") in MODEL_ITEMS and (
            items[start - 1].get("type") != "message" or items[start - 1].get("role") == "assistant"):
        start -= 1
    if start == end:
        return None
    answers = [WireAnswer(_str(i.get("call_id")), "", _cap(content_text(i.get("output"))))
               for i in items[end:] if i.get("type") in ANSWER_ITEMS]
    return WireTail(_responses_turn(items[start:end]), answers)


def _gemini_tail(body: dict[str, Any]) -> WireTail | None:
    found = _last_turn(_list(body.get("contents")), "model")
    if found is None:
        return None
    turn, after = found
    reply = _gemini_reply(None, {"candidates": [{"content": turn}]}) or WireReply()
    answers = []
    for content in after:
        for part in _list(_dict(content).get("parts")):
            response = _dict(_dict(part).get("functionResponse"))
            if not response:
                continue
            result = _dict(response.get("response"))
            text = result.get("output") if "output" in result else result.get("error") if "error" in result \
                else result.get("content", result)
            answers.append(WireAnswer(_str(response.get("id")), _str(response.get("name")),
                                      _cap(text if isinstance(text, str) else content_text(text) or json.dumps(text)),
                                      "error" in result))
    return WireTail(reply, answers)


def _text_tail(messages: list[Any]) -> WireTail | None:
    found = _last_turn(messages, "assistant")
    if found is None:
        return None
    turn, after = found
    content = content_text(turn.get("content"))
    reply = WireReply(content, "", text_actions(content))
    answers = [WireAnswer("", "bash", _cap(content_text(_dict(m).get("content"))))
               for m in after[:1] if _dict(m).get("role") == "user"]
    return WireTail(reply, answers)
