"""A local HTTP server speaking the OpenAI chat-completions and Anthropic messages wire formats.

Tests push scripted replies (or a callback) and drive the real SDK clients against it. It binds to
127.0.0.1 on a free port, runs in a daemon thread and is shut down by the fixture.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from attrs import Factory, define


@define
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = Factory(dict)
    raw: bytes | None = None
    delay_s: float = 0.0


Responder = Callable[[dict[str, Any]], Reply]


class _QuietServer(ThreadingHTTPServer):
    """A client that left before its (delayed) reply was written is expected here (timeout tests): the handler
    thread outlives its test, and the default report of that BrokenPipeError went to whatever sys.stderr was then
    (a later test's CliRunner capture, which it failed: seen once in a fresh-clone run)."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)):
            super().handle_error(request, client_address)


class FakeLLMServer:
    def __init__(self) -> None:
        self.script: deque[Reply | Responder] = deque()
        self.fallback: Responder | None = None
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                request = {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                           "body": body}
                with server.lock:
                    server.requests.append(request)
                    item = server.script.popleft() if server.script else server.fallback
                if item is None:
                    reply = Reply(500, {"error": {"message": "fake server: script exhausted"}})
                else:
                    reply = item(request) if callable(item) else item
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                data = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def push(self, *replies: Reply | Responder) -> None:
        with self.lock:
            self.script.extend(replies)

    def start(self) -> FakeLLMServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def serve_fake_llm():
    """Fixture body; each test module binds it with `fake_llm = pytest.fixture(serve_fake_llm, name=...)`."""
    server = FakeLLMServer().start()
    yield server
    server.stop()


fake_llm = pytest.fixture(serve_fake_llm, name="fake_llm")


# ------------------------------------------------------------------ wire-format builders


def openai_reply(content: str | None = "", tool_calls: list[tuple[str, str, str]] = (), *,
                 finish_reason: str | None = None, reasoning: str | None = None,
                 usage: tuple[int, int, int] = (100, 20, 0), model: str = "fake-model") -> Reply:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [{"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                                 for i, n, a in tool_calls]
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    prompt, completion, cached = usage
    return Reply(200, {
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 1700000000, "model": model,
        "choices": [{"index": 0, "message": message,
                     "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop")}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                  "prompt_tokens_details": {"cached_tokens": cached}},
    })


def anthropic_reply(text: str = "", tool_uses: list[tuple[str, str, dict[str, Any]]] = (), *,
                    thinking: str | None = None, stop_reason: str | None = None,
                    usage: tuple[int, int, int] = (100, 20, 0), model: str = "fake-claude") -> Reply:
    content: list[dict[str, Any]] = []
    if thinking is not None:
        content.append({"type": "thinking", "thinking": thinking, "signature": "sig-" + str(len(thinking))})
    if text:
        content.append({"type": "text", "text": text})
    content += [{"type": "tool_use", "id": i, "name": n, "input": inp} for i, n, inp in tool_uses]
    fresh, out, cached = usage
    return Reply(200, {
        "id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": content,
        "stop_reason": stop_reason or ("tool_use" if tool_uses else "end_turn"), "stop_sequence": None,
        "usage": {"input_tokens": fresh, "output_tokens": out, "cache_read_input_tokens": cached,
                  "cache_creation_input_tokens": 0},
    })


def error_reply(status: int, *, retry_after: str | None = None, anthropic: bool = False) -> Reply:
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    if anthropic:
        body = {"type": "error", "error": {"type": "rate_limit_error" if status == 429 else "api_error",
                                           "message": f"fake {status}"}}
    else:
        body = {"error": {"message": f"fake {status}", "type": "rate_limit" if status == 429 else "server_error"}}
    return Reply(status, body, headers)


# ------------------------------------------------------------------ a scripted "model" replaying the reference


def brief_paths(system_text: str) -> tuple[str, str]:
    data = re.search(r"Input data \(read-only\): `([^`]+)`", system_text)
    ws = re.search(r"Workspace \(read-write\): `([^`]+)`", system_text)
    assert data and ws, "the brief names the data and workspace folders"
    return data.group(1), ws.group(1)


class ReferenceModel:
    """Answers each request with the next tool call of the track's reference solution.

    The paths come from the brief in the request itself, as a real model would read them."""

    def __init__(self, reg, task_id: str, tier: str, wire: str, raw_newlines_at: int | None = None) -> None:
        self.track, self.task = reg.task(task_id)
        self.tier, self.wire = tier, wire
        self.raw_newlines_at = raw_newlines_at  # that step's arguments carry raw newlines (invalid JSON)
        self.steps: list | None = None
        self.position = 0

    def system_text(self, body: dict[str, Any]) -> str:
        if self.wire == "anthropic":
            system = body.get("system")
            return system if isinstance(system, str) else "".join(b.get("text", "") for b in system or [])
        return body["messages"][0]["content"]

    def __call__(self, request: dict[str, Any]) -> Reply:
        if self.steps is None:
            data_dir, ws = brief_paths(self.system_text(request["body"]))
            self.steps = self.track.reference_solution(self.task, self.tier, data_dir, ws).steps
        if self.position >= len(self.steps):
            return self.reply("Done.", None)
        step = self.steps[self.position]
        self.position += 1
        call_id = f"call_{self.position:03d}"
        if step.submit:
            return self.reply(step.say, (call_id, "submit_results", {}))
        return self.reply(step.say, (call_id, "execute_code", {"language": step.language, "code": step.code}))

    def reply(self, text: str, call: tuple[str, str, dict[str, Any]] | None) -> Reply:
        if self.wire == "anthropic":
            return anthropic_reply(text, [call] if call else [], thinking=f"thinking about step {self.position}")
        arguments = json.dumps(call[2]) if call else ""
        if call and self.position == self.raw_newlines_at:
            arguments = re.sub(r"(?<!\\)\\n", "\n", arguments)
            with pytest.raises(json.JSONDecodeError):
                json.loads(arguments)
        calls = [(call[0], call[1], arguments)] if call else []
        return openai_reply(text, calls, reasoning=f"reasoning about step {self.position}")


def test_fake_server_records_requests_and_serves_the_script(fake_llm):
    import urllib.request

    fake_llm.push(error_reply(503), openai_reply("hello"))
    for expected in (503, 200):
        req = urllib.request.Request(fake_llm.url + "/v1/chat/completions", data=b'{"x": 1}', method="POST",
                                     headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=5) as response:
                status = response.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        assert status == expected
    assert [r["body"] for r in fake_llm.requests] == [{"x": 1}, {"x": 1}]
