"""The agent systems people run, round 1: an installed program whose provider resolves but never answers, and the
options every agent declares, each through the command line.

A provider that accepts and stalls, refuses, resets or answers 500 left each program retrying for minutes (until
the run's time limit). The harness's gateway now ends the session once the provider has not answered for
`outage_after=` seconds and a request of the harness's own to it failed too: one line naming the provider
and what happened; an infrastructure failure (retryable) when it never answered at all, the agent's failure when
the model had answered before (what it ran since could have caused it). The program here is a stub that retries
as the real ones do (it stands in for any system: the gateway, not the program, is under test).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import test_cli_newuser
from automedbench_models.gateway import SOCKET_NAME, ModelGateway
from automedbench_models.systems import SYSTEMS
from test_installed_agents_runs import _post
from test_ux_round18 import _one_line

cli = test_cli_newuser.cli

# a program that retries its model for ever, as the real ones do for minutes: a server error, a reset or a refused
# connection is tried again; a final refusal (400) ends it, unless it is `--stubborn` (mini-swe-agent retries even
# those, for ~6 minutes)
STUB = r'''#!/usr/bin/env python3
import os, sys, time, urllib.error, urllib.request
stubborn = "--stubborn" in sys.argv
tries = int(next((a.split("=")[1] for a in sys.argv if a.startswith("--tries=")), "100000"))
url = os.environ["OPENAI_API_BASE"].rstrip("/") + "/chat/completions"
body = b'{"model": "m", "messages": [{"role": "user", "content": "go"}]}'
for attempt in range(tries):
    request = urllib.request.Request(url, body, {"content-type": "application/json", "authorization": "Bearer x"})
    try:
        with urllib.request.urlopen(request, timeout=600) as reply:
            reply.read()
    except urllib.error.HTTPError as exc:
        if exc.code == 400 and not stubborn:
            print("final:", exc.read()[:300], file=sys.stderr)
            sys.exit(1)
    except OSError as exc:
        print("retrying:", exc, file=sys.stderr)
    time.sleep(0.3)
sys.exit(3)  # gave up
'''

CHAT_REPLY = json.dumps({"id": "c1", "object": "chat.completion", "model": "m", "choices": [
    {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}).encode()


class Provider:
    """A provider on loopback that misbehaves in one way: `stall` (accepts, never answers), `reset` (accepts, then
    resets), `refuse` (nothing listens), `error` (HTTP 500 to everything), `late` (answers the first model call,
    then stalls on everything), `slow` (model calls answered after `delay` s, anything else at once), `picky` (model
    calls 500, anything else answered), `sick` (as slow, but a GET answered 503: a proxy or loading server in front)."""

    def __init__(self, mode: str, delay: float = 0.0) -> None:
        self.mode, self.delay, self.posts = mode, delay, 0
        self.received: list[tuple[str, bytes]] = []  # (path, body) of every POST, as the gateway forwarded it
        self.stop = threading.Event()
        self.held: list[socket.socket] = []
        self.http: ThreadingHTTPServer | None = None
        self.raw: socket.socket | None = None

    def __enter__(self) -> Provider:
        if self.mode in ("stall", "reset", "refuse"):
            self.raw = socket.socket()
            self.raw.bind(("127.0.0.1", 0))
            self.port = self.raw.getsockname()[1]
            if self.mode == "refuse":
                self.raw.close()
                return self
            self.raw.listen(16)
            threading.Thread(target=self._accept, daemon=True).start()
            return self
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                if provider.mode == "late" and provider.posts:
                    provider.stop.wait(60)
                    return
                self._send(500 if provider.mode == "error" else 503 if provider.mode == "sick" else 404, b"{}")

            def do_POST(self) -> None:
                provider.received.append((self.path, self.rfile.read(int(self.headers.get("content-length") or 0))))
                provider.posts += 1
                if provider.mode in ("error", "picky"):
                    self._send(500, b'{"error": "boom"}')
                elif provider.mode == "late" and provider.posts > 1:
                    provider.stop.wait(60)
                else:
                    time.sleep(provider.delay)
                    self._send(200, CHAT_REPLY)

            def _send(self, status: int, data: bytes) -> None:  # one write: the status line, two headers, the body
                head = f"HTTP/1.1 {status} -\r\ncontent-type: application/json\r\ncontent-length: {len(data)}\r\n\r\n"
                with contextlib.suppress(OSError):
                    self.wfile.write(head.encode() + data)

            log_message = staticmethod(lambda *args: None)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.port = self.http.server_address[1]
        threading.Thread(target=self.http.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
        return self

    def _accept(self) -> None:
        assert self.raw is not None
        self.raw.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.raw.accept()
            except OSError:
                continue
            if self.mode == "reset":  # an RST, not an orderly close
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                conn.close()
            else:
                self.held.append(conn)

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.http is not None:
            self.http.shutdown()
            self.http.server_close()
        for conn in self.held:
            conn.close()
        if self.raw is not None:
            self.raw.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


@pytest.fixture
def stub(tmp_path) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    program = folder / "mini"
    program.write_text(STUB)
    program.chmod(0o755)
    return program


def _run(cli, tmp_path: Path, stub: Path, url: str, *more: str, wait: str = "1") -> tuple[Any, dict[str, Any], float]:
    out = tmp_path / "runs"
    t0 = time.monotonic()
    result = cli("run", "--task", "toy/vowels", "--agent", "mini-swe-agent", "--agent-option", "api_key_env=none",
                 "--agent-option", f"bin={stub}", "--agent-option", f"base_url={url}",
                 "--agent-option", f"outage_after={wait}", *more, "--time-limit", "90", "--out", out)
    wall = time.monotonic() - t0
    record = json.loads(next(out.glob("*/result.json")).read_text())
    return result, record, wall


@pytest.mark.parametrize("mode,needle", [
    ("stall", "it accepted the connection but sent no reply in 1 s"),
    ("reset", "the connection was reset"),
    ("refuse", "the connection was refused"),
    ("error", "HTTP 500"),
])
def test_a_provider_that_never_answers_ends_the_run_in_bounded_time_as_an_outage(cli, tmp_path, stub, mode, needle):
    """Before, each of these retried until the run's time limit (minutes); now ~outage_after, then one line."""
    with Provider(mode) as provider:
        result, record, wall = _run(cli, tmp_path, stub, provider.url)
    assert wall < 30, wall  # the toy's limit is minutes; the stub would retry for ever
    assert (record["state"], record["end_reason"]) == ("infrastructure_failure", "provider_unavailable"), record
    error = record["error"]  # one line, said once (the summary wraps it to the terminal's width)
    assert "\n" not in error and " ".join(result.output.split()).count(" ".join(error.split())) == 1, result.output
    assert error.startswith(f"mini-swe-agent: the model provider at {provider.url} did not answer: ") and needle in \
        error, error
    assert "a request of the harness's own to it failed too" in error and "outage_after=1 s" in error, error
    assert "the agent's model provider did not answer" in result.output and result.exit_code == 3, result.output


def test_a_program_that_gives_up_on_a_provider_down_before_the_wait_is_an_outage_too(cli, tmp_path, stub):
    """Three refused connections and the program stops (the wait was 60 s): the harness's own request decides, as
    it would have at the end of the wait, and the line does not claim the harness ended the session."""
    with Provider("refuse") as provider:
        _, record, wall = _run(cli, tmp_path, stub, provider.url, "--agent-option", "args=--tries=3", wait="60")
    assert wall < 30, wall
    assert (record["state"], record["end_reason"]) == ("infrastructure_failure", "provider_unavailable"), record
    assert "3 call(s) failed over " in record["error"] and "failed too" in record["error"], record
    assert "the session was ended" not in record["error"], record


def test_a_program_that_retries_even_the_refusals_is_stopped_by_the_harness(cli, tmp_path, stub):
    """mini-swe-agent retries the gateway's final refusal too (10 attempts, waits up to 60 s: ~6 minutes): the
    session script ends the program's whole process group once the gateway says its provider is down."""
    with Provider("refuse") as provider:
        _, record, wall = _run(cli, tmp_path, stub, provider.url, "--agent-option", "args=--stubborn")
    assert wall < 30, wall
    assert record["end_reason"] == "provider_unavailable", record
    events = [json.loads(line) for line in next((tmp_path / "runs").glob("*/trajectory.jsonl")).open()]
    session = next(e for e in events if e.get("session"))
    assert session["exit_code"] == 143, session  # TERM from the session script: the stub never exits on its own


def test_a_provider_that_stops_answering_mid_session_is_the_agents_failure(cli, tmp_path, stub):
    """The model answered once, so something it ran since could have caused the outage: the agent's failure (never
    a retryable one), ended as fast and said in the same words."""
    with Provider("late") as provider:
        result, record, wall = _run(cli, tmp_path, stub, provider.url)
    assert wall < 30 and provider.posts >= 2, (wall, provider.posts)
    assert record["state"] == "agent_failure", record["error"]
    assert "did not answer: it accepted the connection but sent no reply in 1 s" in record["error"]
    assert result.exit_code == 0, result.output


def test_the_outage_option_is_no_near_name_for_another_option(cli, tmp_path):
    """Named provider_timeout at first, it was offered for claude-code's `provider=anthropic` ("did you mean
    'provider_timeout'?"): a user who meant another system's option was sent to a wait. Now no suggestion."""
    result = cli("run", "--task", "toy/vowels", "--agent", "claude-code", "--agent-option", "provider=anthropic",
                 "--out", tmp_path / "runs")
    _one_line(result, "unknown claude-code agent option(s) provider; known: ")
    assert "did you mean" not in result.stderr and "outage_after" in result.stderr, result.stderr


@pytest.mark.parametrize("value", ["0", "soon", "100000"])
def test_a_bad_outage_after_is_one_line(cli, tmp_path, stub, value):
    result = cli("run", "--task", "toy/vowels", "--agent", "mini-swe-agent", "--agent-option", "api_key_env=none",
                 "--agent-option", f"bin={stub}", "--agent-option", f"outage_after={value}",
                 "--out", tmp_path / "runs")
    _one_line(result, "mini-swe-agent: outage_after must be a number of seconds from 1 to 86400")


# ------------------------------------------------------------------ the gateway alone: what the agent cannot cause


@pytest.fixture
def gateway(tmp_path) -> Iterator[tuple[str, Any]]:
    folder = tmp_path / "gw"
    folder.mkdir()
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    made: list[ModelGateway] = []

    def start(url: str, timeout: float = 1.0) -> ModelGateway:
        gw = ModelGateway(url, "openai", None, model="m", max_calls=50, deadline=time.monotonic() + 60,
                          provider_timeout=timeout)
        gw.start(fd)
        made.append(gw)
        return gw

    yield str(folder / SOCKET_NAME), start
    for gw in made:
        gw.close()
    os.close(fd)


def test_a_slow_model_is_waited_for_while_the_provider_answers_the_harness(gateway):
    """A long non-streamed reply sends nothing for minutes: the harness's own request is answered, so it waits."""
    sock, start = gateway
    with Provider("slow", delay=3.0) as provider:
        gw = start(provider.url)
        status, data = _post(sock, "/v1/chat/completions", {"model": "m", "messages": []}, {})
    assert status == 200 and data == CHAT_REPLY
    assert gw.outage() == ("", False)


def test_calls_the_provider_rejects_one_by_one_do_not_make_an_outage(gateway):
    """Whatever the program sends may make a live provider fail it (500): its base URL still answers the harness,
    so the session goes on and nothing becomes an infrastructure failure the agent could cause."""
    sock, start = gateway
    with Provider("picky") as provider:
        gw = start(provider.url)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 2.5:
            status, _ = _post(sock, "/v1/chat/completions", {"model": "m", "messages": []}, {})
            assert status == 500
            time.sleep(0.2)
        # asked while the provider runs, as at a session's end (the harness's own request is what decides)
        assert gw.outage() == ("", False) and not gw.health.down


# ------------------------------------------------------------------ every agent declares its options


@pytest.mark.parametrize("agent,given,needle", [
    ("openai", ["modle=x"], "unknown openai agent option(s) modle (did you mean 'model'?)"),
    ("anthropic", ["base_ulr=http://x"], "unknown anthropic agent option(s) base_ulr (did you mean 'base_url'?)"),
    ("chat", ["provider=openai", "temprature=0"], "unknown chat agent option(s) temprature (did you mean "
                                                  "'temperature'?)"),
    ("inspect", ["solvr=react"], "unknown inspect agent option(s) solvr (did you mean 'solver'?); known: model, "
                                 "solver"),
    ("openai", ["api_key=sk-amb-0123"], "API keys are not accepted as options; put the key in an environment "
                                        "variable and name it with api_key_env=VAR"),
])
def test_the_chat_agents_and_the_inspect_bridge_declare_their_options(cli, tmp_path, agent, given, needle):
    """They checked their own (the inspect bridge dropped a typo silently, the chat agents named no nearest option,
    `plugins openai` said "checked by the component itself"): now the engine's one check, before any run."""
    options = [arg for option in given for arg in ("--agent-option", option)]
    result = cli("run", "--task", "toy/vowels", "--agent", agent, *options, "--out", tmp_path / "runs")
    _one_line(result, needle)
    assert "sk-amb-0123" not in result.output
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.parametrize("agent,option", [("openai", "reasoning_effort"), ("chat", "provider"),
                                          ("inspect", "solver"), ("codex", "outage_after")])
def test_plugins_lists_each_agents_options(cli, agent, option):
    text = " ".join(cli("plugins", agent).output.split())
    assert f"--agent-option {option}=..." in text and "checked by the component itself" not in text, text


def test_a_sweep_refuses_a_chat_agents_typo_before_its_first_run(cli, tmp_path):
    """`sweep --agents openai,anthropic --agent-option modle=x` is refused whole, nothing run."""
    result = cli("sweep", "--agents", "openai,anthropic", "--tasks", "toy/vowels", "--agent-option", "modle=x",
                 "--out", tmp_path / "sweep")
    _one_line(result, "unknown openai agent option(s) modle (did you mean 'model'?)")
    assert not (tmp_path / "sweep").exists() or not any((tmp_path / "sweep").rglob("result.json"))


# ------------------------------------------------------------------ the path a user takes from the README


@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_each_missing_system_is_one_line_naming_installs_that_work(cli, tmp_path, monkeypatch, name):
    """The line's second install (into the agents home) made OpenHands' virtualenv with `python3`, which is 3.11
    here: OpenHands needs 3.12 or later, so that command could not install it. Now `python3.12 -m venv`."""
    monkeypatch.setenv("PATH", "/bin")
    monkeypatch.setenv("AUTOMEDBENCH_AGENTS", str(tmp_path / "agents"))
    result = cli("run", "--task", "toy/vowels", "--agent", name, "--agent-option", "api_key_env=none",
                 "--out", tmp_path / "runs")
    system = SYSTEMS[name]
    _one_line(result, f"{name}: the `{system.binary}` command ({system.title}) is not installed; install it with "
                      f"`{system.install}` (or `")
    private = result.stderr.split("(or `", 1)[1].split("`", 1)[0]
    folder = tmp_path / "agents" / name
    expected = (f"npm install --prefix {folder} {system.package}" if system.kind == "npm" else
                f"{'python3.12' if name == 'openhands' else 'python3'} -m venv {folder} && {folder}/bin/pip install "
                f"{system.package}")
    assert private == expected, private
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
