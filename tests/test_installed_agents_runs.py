"""Installed agent systems end to end: the real program in the sandbox, a scripted model server on loopback.

Each system that installs here (npm and PyPI reach the registries; the install is cached under the agents home,
`~/.cache/automedbench/agents`, and bounded in time: a failed install skips with the reason) runs the toy demo
through the real runner: its model calls go through the harness's gateway to the scripted server, which replays
the toy reference solution as calls of the system's own shell tool. The run's turns, score, tokens and page are
checked. The gateway, the relay and the refusals are tested without any program (fast).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from automedbench.errors import UserError
from automedbench.runner import Run, RunOptions
from automedbench.testing import register_toy_track
from automedbench.trajectory import read_events
from automedbench_models.gateway import RELAY, SOCKET_NAME, ModelGateway, read_usage
from automedbench_models.installed import SYSTEMS, agents_home, find_binary

sys.path.insert(0, str(Path(__file__).parent))
from scripted_model_server import ScriptedModelServer, Step, steps_script

TOY = "toy/vowels"
INSTALL_TIMEOUT_S = 600
SECRET = "sk-amb-test-secret-0123456789"


# ------------------------------------------------------------------ the gateway alone


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=10)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(10)
        self.sock.connect(self.path)


def _post(sock: str, path: str, body: dict, headers: dict) -> tuple[int, bytes]:
    conn = UnixHTTPConnection(sock)
    conn.request("POST", path, json.dumps(body), {"content-type": "application/json", **headers})
    response = conn.getresponse()
    return response.status, response.read()


@pytest.fixture
def gateway_dir(tmp_path):
    folder = tmp_path / "gw"
    folder.mkdir()
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    yield folder, fd
    os.close(fd)


def test_gateway_puts_in_the_real_key_counts_tokens_and_refuses_past_the_budget(gateway_dir):
    folder, fd = gateway_dir
    with ScriptedModelServer(steps_script([Step("hi")] * 5)) as upstream:
        gw = ModelGateway(upstream.url, "anthropic", SECRET, max_calls=2, deadline=time.monotonic() + 60,
                          price=lambda model, i, o, c: (i + o) / 1e6, observe=lambda: {"cases_with_outputs": 0})
        gw.start(fd)
        sock = str(folder / SOCKET_NAME)
        for _ in range(2):
            status, data = _post(sock, "/v1/messages", {"model": "m", "stream": True, "messages": []},
                                 {"x-api-key": "automedbench-gateway", "authorization": "Bearer dummy"})
            assert status == 200 and b"message_stop" in data
        status, data = _post(sock, "/v1/messages", {"model": "m", "messages": []}, {"x-api-key": "dummy"})
        gw.close()
    assert status == 400 and b"turn budget" in data
    assert len(upstream.requests) == 2  # the refused call never left the harness
    assert all(r["headers"]["x-api-key"] == SECRET and "authorization" not in r["headers"] for r in upstream.requests)
    totals = gw.totals()
    assert (totals["calls"], totals["refused"], totals["tokens_in"], totals["tokens_out"]) == (2, 1, 2003, 100)
    assert totals["cost_usd"] == pytest.approx(2103 / 1e6)
    assert gw.records()[0]["observed"] == {"cases_with_outputs": 0}


def test_gateway_time_limit_unreachable_model_and_gemini_key_parameter(gateway_dir):
    folder, fd = gateway_dir
    with ScriptedModelServer(steps_script([Step("hi")])) as upstream:
        gw = ModelGateway(upstream.url, "gemini", SECRET, max_calls=10, deadline=time.monotonic() + 60)
        gw.start(fd)
        sock = str(folder / SOCKET_NAME)
        status, _ = _post(sock, "/v1beta/models/g:generateContent?key=dummy&alt=x", {"contents": []}, {})
        assert status == 200
        assert upstream.requests[0]["path"] == "/v1beta/models/g:generateContent?alt=x"
        assert upstream.requests[0]["headers"]["x-goog-api-key"] == SECRET
        gw.deadline = time.monotonic() - 1
        status, data = _post(sock, "/v1beta/models/g:generateContent", {"contents": []}, {})
        assert status == 400 and b"time limit" in data
        gw.close()
    gone = socket.socket()
    gone.bind(("127.0.0.1", 0))
    port = gone.getsockname()[1]
    gone.close()
    (folder / SOCKET_NAME).unlink()
    gw = ModelGateway(f"http://127.0.0.1:{port}/v1", "openai", None, max_calls=10, deadline=time.monotonic() + 60)
    gw.start(fd)
    status, data = _post(str(folder / SOCKET_NAME), "/v1/chat/completions", {"model": "m"}, {})
    gw.close()
    assert status == 502 and b"unreachable" in data and gw.records()[0]["error"]


def test_relay_joins_a_loopback_port_to_the_socket(gateway_dir, tmp_path):
    folder, fd = gateway_dir
    with ScriptedModelServer(steps_script([Step("relayed")])) as upstream:
        gw = ModelGateway(upstream.url + "/v1", "openai", SECRET, max_calls=5, deadline=time.monotonic() + 60)
        gw.start(fd)
        (tmp_path / "relay.py").write_text(RELAY)
        relay = subprocess.Popen([sys.executable, str(tmp_path / "relay.py"), str(folder / SOCKET_NAME),
                                  str(tmp_path / "port")])
        try:
            for _ in range(100):
                if (tmp_path / "port").exists():
                    break
                time.sleep(0.05)
            conn = http.client.HTTPConnection("127.0.0.1", int((tmp_path / "port").read_text()), timeout=10)
            conn.request("POST", "/v1/chat/completions", json.dumps({"model": "m", "messages": []}),
                         {"authorization": "Bearer automedbench-gateway"})
            reply = json.loads(conn.getresponse().read())
        finally:
            relay.kill()
            relay.wait()
            gw.close()
    assert reply["choices"][0]["message"]["content"] == "relayed"
    assert upstream.requests[0]["headers"]["authorization"] == f"Bearer {SECRET}"


def test_usage_is_read_from_every_wire_format():
    anthropic = (b'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":10,'
                 b'"cache_read_input_tokens":90,"output_tokens":1}}}\n\nevent: message_delta\ndata: '
                 b'{"type":"message_delta","usage":{"output_tokens":33}}\n\n')
    assert read_usage(anthropic) == (100, 33, 90)
    chat = b'data: {"choices":[]}\n\ndata: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3}}\n\n'
    assert read_usage(chat) == (7, 3, 0)
    responses = b'data: {"type":"response.completed","response":{"usage":{"input_tokens":5,"output_tokens":2,' \
                b'"input_tokens_details":{"cached_tokens":4}}}}\n\n'
    assert read_usage(responses) == (5, 2, 4)
    assert read_usage(b'{"usageMetadata":{"promptTokenCount":8,"candidatesTokenCount":2,"thoughtsTokenCount":5}}') \
        == (8, 7, 0)
    assert read_usage(b"not json at all" + b"[" * 100_000) == (0, 0, 0)


# ------------------------------------------------------------------ missing programs


def test_a_missing_program_is_one_line_naming_its_install(tmp_path, reg, monkeypatch):
    # the harness and the system's tools, but no agent program anywhere it looks
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:/bin", "AUTOMEDBENCH_AGENTS": str(tmp_path / "none")}
    for name in ("claude-code", "openhands"):  # through the command line; the rest through the factory
        system = SYSTEMS[name]
        proc = subprocess.run([str(Path(sys.executable).parent / "automedbench"), "run", "--task", TOY, "--agent", name,
                               "--agent-option", "api_key_env=none", "--out", str(tmp_path / "runs")],
                              capture_output=True, text=True, env=env, timeout=120)
        assert proc.returncode == 2, (name, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and system.install in lines[0] and "bin=PATH" in lines[0], proc.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.setenv("AUTOMEDBENCH_AGENTS", env["AUTOMEDBENCH_AGENTS"])
    for name, factory in reg.components["agent"].items():
        if name in SYSTEMS:
            with pytest.raises(UserError, match=re.escape(SYSTEMS[name].install)):
                factory.factory(api_key_env="none")


# ------------------------------------------------------------------ each system, end to end


def _install(name: str) -> Path:
    """The system's program: found, or installed once into the agents home (bounded); skip with the reason."""
    system = SYSTEMS[name]
    try:
        return find_binary(system)
    except Exception:
        pass
    folder = agents_home() / name
    if system.kind == "npm":
        if not shutil.which("npm"):
            pytest.skip(f"{name}: npm is not installed")
        command = ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(folder), system.package]
    else:
        uv = Path(sys.executable).parent / "uv"
        pythons = sorted(Path.home().glob(".pyenv/versions/3.12*/bin/python3.12")) + \
            [Path(p) for p in filter(None, [shutil.which("python3.12")])]
        python = (pythons[0] if name == "openhands" and pythons else
                  None if name == "openhands" else Path(sys.base_prefix) / "bin" / "python3")
        if python is None:
            pytest.skip("openhands needs Python >= 3.12 (none found)")
        if not uv.exists():
            pytest.skip("uv is not installed beside the test interpreter")
        command = ["bash", "-c", f"'{uv}' venv -q --python '{python}' '{folder}' && '{uv}' pip install -q "
                                 f"--python '{folder}/bin/python' $('{sys.executable}' scripts/uv-from-pip-config.py "
                                 f"| tr '\\n' ' ') {system.package}"]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S,
                              cwd=Path(__file__).parent.parent)
    except subprocess.TimeoutExpired:
        shutil.rmtree(folder, ignore_errors=True)
        pytest.skip(f"{name}: install took longer than {INSTALL_TIMEOUT_S} s")
    if proc.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        pytest.skip(f"{name}: install failed: {proc.stderr.strip()[-300:]}")
    return find_binary(system)


def toy_script(reg, final: Step):
    """The toy reference solution as shell commands, then `final`."""
    register_toy_track()
    track, task = reg.task(TOY)
    steps = [s for s in track.reference_solution(task, "lite", "/data/public", "/workspace").steps if not s.submit]
    commands = [s.code if s.language == "bash" else f"python3 - <<'PYEOF'\n{s.code}\nPYEOF" for s in steps]
    return steps_script([Step(s.say, c) for s, c in zip(steps, commands, strict=True)], final), len(steps)


PREFIX = {"anthropic": "", "gemini": ""}  # others take the base URL with /v1


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_installed_system_runs_the_toy_demo_against_the_scripted_model(name, reg, data_root, tmp_path,
                                                                       monkeypatch):
    binary = _install(name)
    final = Step("Done.", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" if name == "mini-swe-agent" else None)
    script, steps = toy_script(reg, final)
    monkeypatch.setenv("AMB_TEST_MODEL_KEY", SECRET)
    with ScriptedModelServer(script) as server:
        wire = SYSTEMS[name].wire
        url = server.url + PREFIX.get(wire, "/v1")
        options = {"bin": str(binary), "base_url": url, "api_key_env": "AMB_TEST_MODEL_KEY", "model": "scripted"}
        runner = Run(RunOptions(TOY, "lite", name, out=tmp_path / "runs", data_root=data_root,
                                agent_options=options, keep_workspace=True), reg)
        result = runner.execute()
    assert result.state == "scored" and result.end_reason == "submitted", result.error
    events = read_events(runner.run_dir / "trajectory.jsonl")
    replies = [e for e in events if e["type"] == "assistant" and e.get("imported")]
    calls = [e for e in events if e["type"] == "tool" and e.get("imported")]
    # every scripted step is a turn of its own, with the command it ran and its exit code; then the final reply
    assert len(replies) == steps + 1 and [r["turn"] for r in replies] == list(range(1, steps + 2))
    finishing = 1 if final.command else 0  # mini-swe-agent ends with its own command
    assert len(calls) == steps + finishing
    assert all(c["exit_code"] == 0 for c in calls[:steps]), [(c["code"][-60:], c["exit_code"]) for c in calls]
    assert result.runtime.turns == steps + 2  # the submit is the harness's turn after the program's
    gateway = next(e for e in events if e["type"] == "model_gateway")
    assert gateway["calls"] == len(server.requests) >= steps + 1
    assert result.runtime.tokens_in == gateway["tokens_in"] > 0
    assert result.task.strict == 1.0 and result.stage("S1").score == 1.0 and result.stage("S4").score == 1.0
    # the key reached the model and nothing the agent could read
    assert all(SECRET in json.dumps(r["headers"]) for r in server.requests)
    leaked = [p for p in (runner.run_dir / "workspace").rglob("*") if p.is_file() and
              SECRET.encode() in p.read_bytes()]
    assert not leaked and SECRET not in (runner.run_dir / "trajectory.jsonl").read_text()
    page = runner.run_dir / "view.html"
    if page.exists():  # written by the campaign built-in: the program's steps shown as turns
        html = page.read_text()
        assert f'id="turn-{steps}"' in html and "cases; ascii True" in html  # a step's own output, shown


@pytest.mark.slow
def test_turn_budget_is_enforced_at_the_gateway(reg, data_root, tmp_path):
    binary = _install("codex")  # it has no turn limit of its own: the gateway's refusal is what stops it
    script, _ = toy_script(reg, Step("Done."))
    with ScriptedModelServer(script) as server:
        options = {"bin": str(binary), "base_url": server.url + "/v1", "api_key_env": "none", "model": "scripted"}
        runner = Run(RunOptions(TOY, "lite", "codex", out=tmp_path / "runs", data_root=data_root,
                                agent_options=options, max_turns=4), reg)
        result = runner.execute()
    events = read_events(runner.run_dir / "trajectory.jsonl")
    gateway = next(e for e in events if e["type"] == "model_gateway")
    assert gateway["calls"] == 3 and gateway["refused"] >= 1 and len(server.requests) == 3
    assert result.state in ("scored", "agent_failure") and result.runtime.turns <= 4


def test_an_unreadable_transcript_ends_the_run_as_the_agents_failure(reg, data_root, tmp_path):
    (tmp_path / "prog").mkdir()
    fake = tmp_path / "prog" / "fake-claude"
    fake.write_text("#!/bin/sh\necho 'not a transcript'\nexit 0\n")
    fake.chmod(0o755)
    register_toy_track()
    options = {"bin": str(fake), "base_url": "http://127.0.0.1:9", "api_key_env": "none"}
    result = Run(RunOptions(TOY, "lite", "claude-code", out=tmp_path / "runs", data_root=data_root,
                            agent_options=options), reg).execute()
    assert result.state == "agent_failure" and "transcript could not be read" in result.error
