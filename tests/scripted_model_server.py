"""A scripted model server on loopback for installed agent systems: four wire formats, replies from a script.

The installed CLIs (Claude Code, Codex, Gemini CLI, Qwen Code, OpenHands, mini-swe-agent) each speak one wire
format, streaming or not: the Anthropic messages API, OpenAI chat completions, the OpenAI responses API and the
Gemini API. This server answers all four at once. Each request gets the script's next step: a shell command
(turned into a call of whatever shell tool the request offers, with that tool's own argument names), or a final
text with no call. The CLI binary is real; only the model's replies are scripted. Used by the tests, and by hand
(`python tests/scripted_model_server.py`) to look at what a CLI sends.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from attrs import define

SHELL_TOOL = re.compile(r"shell|bash|terminal|exec|command", re.I)


@define
class Step:
    """One scripted reply: `say` as text, then `command` through the shell tool (none: a final text); or `tool`, a
    call of that tool with no arguments when the request offers it (the chat agent's `submit_results`)."""

    say: str = ""
    command: str | None = None
    tool: str | None = None


Script = Callable[[dict[str, Any]], Step]


def steps_script(steps: list[Step], final: Step | None = None) -> Script:
    """Answer each request with the next step, then `final` (default: a text saying it is done) for ever."""
    queue = iter(steps)

    def script(_request: dict[str, Any]) -> Step:
        return next(queue, final or Step("Done."))

    return script


# ------------------------------------------------------------------ which tool runs a shell command


def _schema(tool: dict[str, Any]) -> dict[str, Any]:
    for key in ("input_schema", "parameters", "parametersJsonSchema"):
        if isinstance(tool.get(key), dict):
            return tool[key]
    return {}


def offered_tools(wire: str, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(name, JSON schema) of each function tool the request offers, in the request's order."""
    found = []
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if wire == "gemini":
            found += [(d.get("name", ""), _schema(d)) for d in tool.get("functionDeclarations") or []]
        elif isinstance(tool.get("function"), dict):
            found.append((tool["function"].get("name", ""), _schema(tool["function"])))
        elif tool.get("name"):
            found.append((tool["name"], _schema(tool)))
    return found


def shell_call(wire: str, body: dict[str, Any], command: str) -> tuple[str, dict[str, Any]] | None:
    """The request's shell tool and the arguments that run `command` through it, or None (no such tool)."""
    tools = offered_tools(wire, body)
    exact = [t for t in tools if t[0] in ("Bash", "bash", "shell", "shell_command", "exec_command",
                                          "run_shell_command", "execute_bash", "terminal")]
    for name, schema in exact or [t for t in tools if SHELL_TOOL.search(t[0])]:
        props = schema.get("properties") or {}
        if "code" in props and "language" in props:  # the harness's own execute_code (the chat agent)
            return name, {"language": "bash", "code": command}
        key = next((k for k in ("command", "cmd") if k in props), None)
        if key is None:
            continue
        value: Any = ["bash", "-lc", command] if props[key].get("type") == "array" else command
        args: dict[str, Any] = {key: value}
        for other in schema.get("required") or []:
            if other in args:
                continue
            spec = props.get(other) or {}
            if spec.get("enum"):
                args[other] = spec["enum"][0]
            elif spec.get("type") == "boolean":
                args[other] = False
            elif spec.get("type") in ("integer", "number"):
                args[other] = 600
            else:
                args[other] = "scripted step"
        return name, args
    return None


# ------------------------------------------------------------------ replies per wire format


def _sse(events: list[tuple[str | None, dict[str, Any] | str]]) -> bytes:
    out = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        out.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
    return "".join(out).encode()


def anthropic_reply(body: dict[str, Any], text: str, call: tuple[str, dict[str, Any]] | None, n: int) -> bytes:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    if call:
        content.append({"type": "tool_use", "id": f"toolu_{n:04d}", "name": call[0], "input": call[1]})
    stop = "tool_use" if call else "end_turn"
    usage = {"input_tokens": 1000 + n, "output_tokens": 50, "cache_read_input_tokens": 0,
             "cache_creation_input_tokens": 0}
    message = {"id": f"msg_{n:04d}", "type": "message", "role": "assistant", "model": body.get("model", "scripted"),
               "content": content, "stop_reason": stop, "stop_sequence": None, "usage": usage}
    if not body.get("stream"):
        return json.dumps(message).encode()
    events: list[tuple[str | None, dict[str, Any] | str]] = [
        ("message_start", {"type": "message_start", "message": {**message, "content": [], "stop_reason": None,
                                                                 "usage": {**usage, "output_tokens": 1}}})]
    for index, block in enumerate(content):
        if block["type"] == "text":
            events += [("content_block_start", {"type": "content_block_start", "index": index,
                                                "content_block": {"type": "text", "text": ""}}),
                       ("content_block_delta", {"type": "content_block_delta", "index": index,
                                                "delta": {"type": "text_delta", "text": block["text"]}})]
        else:
            events += [("content_block_start", {"type": "content_block_start", "index": index,
                                                "content_block": {**block, "input": {}}}),
                       ("content_block_delta", {"type": "content_block_delta", "index": index,
                                                "delta": {"type": "input_json_delta",
                                                          "partial_json": json.dumps(block["input"])}})]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events += [("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                  "usage": {"output_tokens": usage["output_tokens"]}}),
               ("message_stop", {"type": "message_stop"})]
    return _sse(events)


def chat_reply(body: dict[str, Any], text: str, call: tuple[str, dict[str, Any]] | None, n: int,
               metered: bool = True) -> bytes:
    """A chat-completions reply; `metered=False` leaves the token counts out, as llama-cpp-python's stream does."""
    usage = {"prompt_tokens": 1000 + n, "completion_tokens": 50, "total_tokens": 1050 + n} if metered else None
    calls = [{"index": 0, "id": f"call_{n:04d}", "type": "function",
              "function": {"name": call[0], "arguments": json.dumps(call[1])}}] if call else []
    finish = "tool_calls" if call else "stop"
    base = {"id": f"chatcmpl-{n}", "created": 1700000000, "model": body.get("model", "scripted")}
    if not body.get("stream"):
        message = {"role": "assistant", "content": text or None,
                   **({"tool_calls": [{k: v for k, v in c.items() if k != "index"} for c in calls]} if calls else {})}
        return json.dumps({**base, "object": "chat.completion", **({"usage": usage} if usage else {}),
                           "choices": [{"index": 0, "message": message, "finish_reason": finish}]}).encode()
    chunk = {**base, "object": "chat.completion.chunk"}
    events: list[tuple[str | None, dict[str, Any] | str]] = [
        (None, {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text},
                                      "finish_reason": None}]})]
    if calls:
        events.append((None, {**chunk, "choices": [{"index": 0, "delta": {"tool_calls": calls},
                                                    "finish_reason": None}]}))
    events.append((None, {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}))
    events += [(None, {**chunk, "choices": [], "usage": usage})] if usage else []
    events.append((None, "[DONE]"))
    return _sse(events)


def responses_reply(body: dict[str, Any], text: str, call: tuple[str, dict[str, Any]] | None, n: int) -> bytes:
    items: list[dict[str, Any]] = []
    if text:
        items.append({"type": "message", "id": f"msg_{n:04d}", "role": "assistant", "status": "completed",
                      "content": [{"type": "output_text", "text": text, "annotations": []}]})
    if call:
        items.append({"type": "function_call", "id": f"fc_{n:04d}", "call_id": f"call_{n:04d}", "name": call[0],
                      "arguments": json.dumps(call[1]), "status": "completed"})
    usage = {"input_tokens": 1000 + n, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 50,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 1050 + n}
    response = {"id": f"resp_{n:04d}", "object": "response", "created_at": 1700000000, "status": "completed",
                "model": body.get("model", "scripted"), "output": items, "usage": usage}
    if not body.get("stream"):
        return json.dumps(response).encode()
    events: list[tuple[str | None, dict[str, Any] | str]] = [
        ("response.created", {"type": "response.created",
                              "response": {**response, "status": "in_progress", "output": []}})]
    for index, item in enumerate(items):
        events += [("response.output_item.added", {"type": "response.output_item.added", "output_index": index,
                                                   "item": item}),
                   ("response.output_item.done", {"type": "response.output_item.done", "output_index": index,
                                                  "item": item})]
    events.append(("response.completed", {"type": "response.completed", "response": response}))
    return _sse(events)


def gemini_reply(body: dict[str, Any], text: str, call: tuple[str, dict[str, Any]] | None, n: int,
                 stream: bool) -> bytes:
    parts: list[dict[str, Any]] = [{"text": text}] if text else []
    if call:
        parts.append({"functionCall": {"name": call[0], "args": call[1], "id": f"fc_{n:04d}"}})
    reply = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
             "usageMetadata": {"promptTokenCount": 1000 + n, "candidatesTokenCount": 50,
                               "totalTokenCount": 1050 + n}, "modelVersion": "scripted"}
    return _sse([(None, reply)]) if stream else json.dumps(reply).encode()


# ------------------------------------------------------------------ the server


def wire_of(path: str) -> str:
    if "/messages" in path:
        return "anthropic"
    if path.rstrip("/").endswith("/responses"):
        return "responses"
    if "generatecontent" in path.lower() or "counttokens" in path.lower():
        return "gemini"
    return "chat"


class ScriptedModelServer:
    """Serve `script` on 127.0.0.1 (a free port); `requests` keeps every request (path, headers, body);
    `metered=False`: chat replies carry no token counts."""

    def __init__(self, script: Script, metered: bool = True) -> None:
        self.script, self.metered = script, metered
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.counter = itertools.count(1)
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # model lists and health checks
                self._send(200, json.dumps({"object": "list", "data": [{"id": "scripted", "object": "model"}],
                                            "models": []}).encode(), "application/json")

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                path = self.path
                with server.lock:
                    server.requests.append({"path": path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                            "body": body})
                wire = wire_of(path)
                if path.split("?")[0].endswith(("count_tokens", ":countTokens")):
                    self._send(200, json.dumps({"input_tokens": 100, "totalTokens": 100}).encode(),
                               "application/json")
                    return
                with server.lock:
                    step = server.script({"wire": wire, "path": path, "body": body})
                    n = next(server.counter)
                call = shell_call(wire, body, step.command) if step.command is not None else None
                if step.tool and step.tool in [name for name, _ in offered_tools(wire, body)]:
                    call = (step.tool, {})
                text = step.say
                if step.command is not None and call is None:  # no shell tool offered: the command as a block
                    fence = "mswea_bash_command" if b"mswea_bash_command" in raw else "bash"  # mini's text mode
                    text = f"{text}\n\n```{fence}\n{step.command}\n```\n"
                stream = bool(body.get("stream")) or "alt=sse" in path or "streamgeneratecontent" in path.lower()
                if wire == "anthropic":
                    data = anthropic_reply(body, text, call, n)
                elif wire == "responses":
                    data = responses_reply(body, text, call, n)
                elif wire == "gemini":
                    data = gemini_reply(body, text, call, n, stream)
                else:
                    data = chat_reply(body, text, call, n, server.metered)
                self._send(200, data, "text/event-stream" if stream else "application/json")

            def _send(self, status: int, data: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> ScriptedModelServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


if __name__ == "__main__":  # by hand: print each request's path and tools, answer with `ls` then a final text
    import sys
    import time

    with ScriptedModelServer(steps_script([Step("Listing.", "ls -la")])) as srv:
        print(srv.url, flush=True)
        seen = 0
        while True:
            time.sleep(0.5)
            for req in srv.requests[seen:]:
                names = [name for name, _ in offered_tools(wire_of(req["path"]), req["body"])]
                print(req["path"], names, file=sys.stderr, flush=True)
            seen = len(srv.requests)
