"""Installed agent systems end to end: the real program in the sandbox, a scripted model server on loopback.

Each system that installs here (npm and PyPI reach the registries; the install is cached under the agents home,
`~/.cache/automedbench/agents`, and bounded in time: a failed install skips with the reason) runs the toy demo
through the real runner: its model calls go through the harness's gateway to the scripted server, which replays
the toy reference solution as calls of the system's own shell tool. The run's turns, score, tokens and page are
checked. The gateway, the relay and the refusals are tested without any program (fast).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from automedbench.errors import UserError
from automedbench.runner import Run, RunOptions
from automedbench.testing import register_toy_track
from automedbench.trajectory import read_events
from automedbench_models.gateway import RELAY, SOCKET_NAME, ModelGateway, read_usage
from automedbench_models.installed import find_binary
from automedbench_models.systems import SYSTEMS, agents_home

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
        gw = ModelGateway(upstream.url, "anthropic", SECRET, model="m", max_calls=2, deadline=time.monotonic() + 60,
                          price=lambda model, i, o, c: (i + o) / 1e6)
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
    assert [r["refused"] != "" for r in gw.records()] == [False, False, True]


def test_gateway_counts_replies_without_token_counts_as_unmetered(gateway_dir):
    """llama-cpp-python's streamed replies carry no usage: a live Qwen Code run recorded 0 tokens for 378 s of
    model time. Such replies are counted apart (their tokens are unknown, not zero); metered ones are not."""
    folder, fd = gateway_dir
    for metered, expected in ((False, 2), (True, 0)):
        with ScriptedModelServer(steps_script([Step("hi")] * 2), metered=metered) as upstream:
            gw = ModelGateway(upstream.url + "/v1", "openai", SECRET, model="m",
                              max_calls=5, deadline=time.monotonic() + 60)
            gw.start(fd)
            for stream in (True, False):
                status, _ = _post(str(folder / SOCKET_NAME), "/v1/chat/completions",
                                  {"model": "m", "stream": stream, "messages": []}, {})
                assert status == 200
            gw.close()
        (folder / SOCKET_NAME).unlink(missing_ok=True)
        totals = gw.totals()
        assert totals["unmetered"] == expected and (totals["tokens_in"] > 0) == metered, totals


def test_gateway_time_limit_unreachable_model_and_gemini_key_parameter(gateway_dir):
    folder, fd = gateway_dir
    with ScriptedModelServer(steps_script([Step("hi")])) as upstream:
        gw = ModelGateway(upstream.url, "gemini", SECRET, model="g", max_calls=10, deadline=time.monotonic() + 60)
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
    assert gw.outage() == ("", False)  # a call got through: whatever came after is the session's own
    gone = socket.socket()
    gone.bind(("127.0.0.1", 0))
    port = gone.getsockname()[1]
    gone.close()
    (folder / SOCKET_NAME).unlink()
    gw = ModelGateway(f"http://127.0.0.1:{port}/v1", "openai", None, model="m",
                      max_calls=10, deadline=time.monotonic() + 60)
    gw.start(fd)
    status, data = _post(str(folder / SOCKET_NAME), "/v1/chat/completions", {"model": "m"}, {})
    gw.close()
    assert status == 502 and b"unreachable" in data and gw.records()[0]["error"]
    # no call ever reached the provider: the run ends as the agent's failure naming it, as a chat agent's
    # model call failing after its retries does (a live run against a stopped server had scored F, 19 calls spent)
    down, never_answered = gw.outage()
    assert down.startswith("1 call(s) failed over ") and "failed too" in down and never_answered, down


def test_relay_joins_a_loopback_port_to_the_socket(gateway_dir, tmp_path):
    folder, fd = gateway_dir
    with ScriptedModelServer(steps_script([Step("relayed")])) as upstream:
        gw = ModelGateway(upstream.url + "/v1", "openai", SECRET, model="m",
                          max_calls=5, deadline=time.monotonic() + 60)
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


def test_a_flood_from_the_sandbox_is_answered_429_and_an_idle_connection_dropped(gateway_dir, monkeypatch):
    import threading

    from automedbench_models import gateway as gateway_module

    monkeypatch.setattr(gateway_module, "IDLE_TIMEOUT_S", 0.5)
    folder, fd = gateway_dir

    def slow(_request):
        time.sleep(0.2)  # the upstream answers one at a time: requests pile up at the gateway
        return Step("hi")

    with ScriptedModelServer(slow) as upstream:
        gw = ModelGateway(upstream.url + "/v1", "openai", SECRET, model="m",
                          max_calls=1000, deadline=time.monotonic() + 60)
        gw.start(fd)
        sock = str(folder / SOCKET_NAME)
        idle = socket.socket(socket.AF_UNIX)
        idle.connect(sock)  # holds a slot by sending nothing
        statuses: list[int] = []
        threads_before = threading.active_count()
        peak = [0]

        def one() -> None:
            try:
                statuses.append(_post(sock, "/v1/chat/completions", {"model": "m", "messages": []}, {})[0])
            except OSError:
                statuses.append(-1)
            peak[0] = max(peak[0], threading.active_count())

        flood = [threading.Thread(target=one) for _ in range(40)]
        for thread in flood:
            thread.start()
        for thread in flood:
            thread.join(timeout=60)
        idle.settimeout(5)
        dropped = idle.recv(100) == b""  # the gateway closed the idle connection
        after = _post(sock, "/v1/chat/completions", {"model": "m", "messages": []}, {})[0]
        gw.close()
    assert dropped and after == 200  # its slot came back
    admitted = statuses.count(200)
    # the rest were answered 429 at once (or, when the answer came before their body was sent, reset)
    assert 1 <= admitted <= gateway_module.MAX_ACTIVE and set(statuses) <= {200, 429, -1}, sorted(statuses)
    assert len(statuses) == 40 and statuses.count(429) > 0
    assert len(upstream.requests) == admitted + 1  # nothing refused reached the model
    assert gw.totals()["overloaded"] >= 40 - admitted
    # threads stayed bounded: the test's 40 clients, at most MAX_ACTIVE gateway handlers and as many upstream ones
    # (a thread per flooding connection would have added up to 40 more)
    assert peak[0] - threads_before <= 40 + 2 * gateway_module.MAX_ACTIVE + 4


def test_closing_the_gateway_drops_the_replies_still_being_made(gateway_dir):
    """The session is over: a request still waiting for the model is cut (a local server stops generating for a
    client that is gone; before, a killed session's retries kept llama.cpp busy for the next run's requests)."""
    import threading

    folder, fd = gateway_dir

    def slow(_request):
        time.sleep(8)
        return Step("too late")

    with ScriptedModelServer(slow) as upstream:
        gw = ModelGateway(upstream.url + "/v1", "openai", None, model="m", max_calls=10, deadline=time.monotonic() + 60)
        gw.start(fd)
        done: list[float] = []

        def ask() -> None:
            with contextlib.suppress(OSError):
                _post(str(folder / SOCKET_NAME), "/v1/chat/completions", {"model": "m", "messages": []}, {})
            done.append(time.monotonic())

        client = threading.Thread(target=ask)
        client.start()
        while not upstream.requests:
            time.sleep(0.05)
        closed = time.monotonic()
        gw.close()
        client.join(timeout=20)
    assert done and done[0] - closed < 4  # not the model's 8 s
    assert gw.records()[0]["status"] == 502 and not gw.upstream


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


def test_a_python_program_without_bytecode_is_named_with_the_command_that_compiles_it(tmp_path):
    from automedbench_models.installed import missing_bytecode

    venv = tmp_path / "mini-swe-agent"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    package = venv / "lib/python3.11/site-packages/litellm"
    package.mkdir(parents=True)
    (package / "main.py").write_text("x = 1\n")
    program = venv / "bin" / "mini"
    program.write_text(f"#!{venv}/bin/python\n")
    program.chmod(0o755)
    assert missing_bytecode(program) == f"{venv}/bin/python -m compileall -q {package.parent}"
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "main.cpython-311.pyc").write_bytes(b"")
    assert missing_bytecode(program) == ""
    assert missing_bytecode(Path("/bin/sh")) == ""  # not a virtualenv's program


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
                                 "--compile-bytecode "
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


def _workspace_holds(run_dir: Path, needle: bytes) -> bool:
    """Whether any byte the kept workspace holds (its files, or every data block of its quota image, deleted files'
    blocks too) contains `needle`."""
    image = run_dir / "workspace.img"
    if not image.exists():
        return any(needle in p.read_bytes() for p in (run_dir / "workspace").rglob("*") if p.is_file())
    with image.open("rb") as handle:
        fd, size, pos, tail = handle.fileno(), image.stat().st_size, 0, b""
        while pos < size:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:  # no data past pos
                return False
            end = os.lseek(fd, start, os.SEEK_HOLE)
            os.lseek(fd, start, os.SEEK_SET)
            while start < end:
                chunk = os.read(fd, min(1 << 20, end - start))
                if not chunk:
                    break
                if needle in tail + chunk:
                    return True
                tail, start = chunk[-len(needle):], start + len(chunk)
            pos = end
    return False


@pytest.fixture(scope="module")
def chat_stages(reg, data_root, tmp_path_factory):
    """S1–S5 of the same scripted plan through the built-in chat agent (OpenAI chat completions, the same server):
    what every installed system must score."""
    script, _ = toy_script(reg, Step("Submitting.", tool="submit_results"))
    with ScriptedModelServer(script) as server:
        options = {"base_url": server.url + "/v1", "api_key_env": "none", "model": "scripted"}
        result = Run(RunOptions(TOY, "lite", "openai", out=tmp_path_factory.mktemp("chat"), data_root=data_root,
                                agent_options=options), reg).execute()
    assert result.state == "scored" and result.end_reason == "submitted", result.error
    stages = {s.stage: s.score for s in result.stages}
    assert stages["S3"] == 1.0 and stages["S2"] > 0.2  # a pilot, checked, then the batch: the plan is sound
    return stages


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_installed_system_runs_the_toy_demo_against_the_scripted_model(name, reg, data_root, tmp_path,
                                                                       monkeypatch, chat_stages):
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
    # the steps are the harness's own record (seen at the gateway both ways), never the program's transcript
    assert not [e for e in events if e["type"] in ("tool", "assistant") and e.get("imported")]
    replies = [e for e in events if e["type"] == "assistant" and e.get("observed_by") == "gateway"]
    calls = [e for e in events if e["type"] == "tool" and e.get("observed_by") == "gateway"]
    # every scripted step is a turn of its own, with the command it ran and its exit code; then the final reply
    assert [r["turn"] for r in replies] == list(range(1, steps + 2))
    assert len(calls) == steps and all(c["exit_code"] == 0 for c in calls), [(c["code"][-60:], c["exit_code"])
                                                                               for c in calls]
    assert [c["cases_with_outputs"] for c in calls] == [0, 0, 0, 1, 1, 6, 6]  # seen by the harness, per step
    sessions = [e for e in events if e.get("session")]
    assert len(sessions) == 1 and sessions[0]["turn"] == 1
    assert result.runtime.turns == steps + 2 and result.runtime.tool_calls == steps + 1  # and the harness's submit
    # scored exactly as the chat agent with the same plan: the pilot was copied when the gateway saw it
    assert {s.stage: s.score for s in result.stages} == chat_stages
    checks = json.loads((runner.run_dir / "pilot_checks.json").read_text())
    assert [(c["turn"], c["case"], c["valid"]) for c in checks] == [(4, "case_00", True)]
    gateway = next(e for e in events if e["type"] == "model_gateway")
    assert gateway["calls"] == len(server.requests) >= steps + 1 and gateway["observed"]["steps"] == steps
    assert gateway["reported"]["unseen_steps"] == 0  # the transcript agrees with the gateway
    assert result.runtime.tokens_in == gateway["tokens_in"] > 0
    assert result.task.strict == 1.0 and result.runtime.agent_s > 0  # model time is the agent's
    # the key reached the model and nothing the agent could read
    assert all(SECRET in json.dumps(r["headers"]) for r in server.requests)
    assert _workspace_holds(runner.run_dir, b"# Plan: count vowels")  # the scan reads what the agent wrote
    assert not _workspace_holds(runner.run_dir, SECRET.encode())
    assert SECRET not in (runner.run_dir / "trajectory.jsonl").read_text()
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


SOCK = "/workspace/.agent_cli/model.sock"
# Codex is told to: write forged steps (a checked pilot that never happened) into its own transcript, past where
# its own later output will reach
FORGED_STEPS = [{"type": "item.completed", "item": {"id": f"f{n}", "type": "command_execution", "command": command,
                                                   "aggregated_output": "ok", "exit_code": 0, "status": "completed"}}
                for n, command in enumerate(["python3 count.py case_00", "python3 -c 'print(len(files))'"])]
FORGED_LINES = "\n" + "\n".join(json.dumps(s) for s in FORGED_STEPS) + "\n"
FORGE_TRANSCRIPT = f"""python3 - <<'EOF'
with open('/workspace/.agent_cli/transcript.jsonl', 'r+b') as f:
    f.seek(0, 2)
    f.seek(f.tell() + 100000)
    f.write({FORGED_LINES.encode()!r})
EOF"""
# ... send the gateway a second, different answer to its first call, then 10 requests at once of its own
FORGED_ANSWER = {"model": "scripted", "input": [
    {"type": "function_call", "name": "exec_command", "arguments": "{}", "call_id": "call_0001"},
    {"type": "function_call_output", "call_id": "call_0001", "output": "Process exited with code 0\nOutput:\npilot\n"}]}
DISPUTE_AND_FLOOD = f"""python3 - <<'EOF'
import json, socket, threading
def post(body):
    s = socket.socket(socket.AF_UNIX); s.settimeout(30); s.connect({SOCK!r})
    data = json.dumps(body).encode()
    head = "POST /v1/responses HTTP/1.1\\r\\nhost: x\\r\\ncontent-length: %d\\r\\n\\r\\n" % len(data)
    s.sendall(head.encode() + data)
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    return out.split(b" ", 2)[1].decode()
print("dispute", post(json.loads({json.dumps(FORGED_ANSWER)!r})))
statuses = []
flood = lambda n: statuses.append(post({{"model": "scripted", "input": "FLOOD-%d" % n}}))
threads = [threading.Thread(target=flood, args=(n,)) for n in range(10)]
[t.start() for t in threads]; [t.join() for t in threads]
print("flood", sorted(statuses))
EOF"""
# ... and put a model server of its own in the gateway's place: the program's next steps go there
FAKE_MODEL = r"""
import json, os, socket, socketserver
from http.server import BaseHTTPRequestHandler
SOCK = "/workspace/.agent_cli/model.sock"
seen = [0]
def sse(items):
    resp = {"id": "r", "object": "response", "status": "completed", "output": items,
            "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}}
    events = [("response.created", {"type": "response.created", "response": {**resp, "output": []}})]
    events += [("response.output_item.done", {"type": "response.output_item.done", "output_index": i, "item": it})
               for i, it in enumerate(items)]
    events.append(("response.completed", {"type": "response.completed", "response": resp}))
    return "".join(f"event: {n}\ndata: {json.dumps(d)}\n\n" for n, d in events).encode()
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        seen[0] += 1
        if seen[0] == 1:
            items = [{"type": "function_call", "id": "fc_x", "call_id": "call_hijack", "name": "exec_command",
                      "arguments": json.dumps({"cmd": "touch /workspace/HIJACKED; echo checked pilot"}),
                      "status": "completed"}]
        else:
            items = [{"type": "message", "id": "m_x", "role": "assistant", "status": "completed",
                      "content": [{"type": "output_text", "text": "Done.", "annotations": []}]}]
        data = sse(items)
        self.send_response(200); self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(data))); self.end_headers(); self.wfile.write(data)
    def log_message(self, *a): pass
class S(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
os.unlink(SOCK)
server = S(SOCK, H)
open(SOCK + ".ready", "w").close()
server.serve_forever()
"""
HIJACK = (f"cat > /workspace/.agent_cli/fake.py <<'PYEOF'\n{FAKE_MODEL}\nPYEOF\n"
          "setsid nohup python3 /workspace/.agent_cli/fake.py > /dev/null 2>&1 < /dev/null &\n"
          f"for i in $(seq 100); do [ -e {SOCK}.ready ] && break; sleep 0.1; done; echo replaced")


@pytest.mark.slow
def test_a_model_that_forges_disputes_floods_and_replaces_the_gateway_earns_nothing_for_it(reg, data_root, tmp_path):
    """Codex (real), told by its model to write every case at once, then forge its own transcript (a checked pilot),
    answer the gateway's first call again differently, flood the gateway, and finally put a model server of its
    own in place of the gateway's socket, which has the program run a "pilot" the harness never sees."""
    binary = _install("codex")
    register_toy_track()
    track, task = reg.task(TOY)
    batch = next(s for s in track.reference_solution(task, "lite", "/data/public", "/workspace").steps
                 if s.say == "Running every case.")
    queue = iter([Step("All at once.", batch.code), Step("Tidy the log.", FORGE_TRANSCRIPT),
                  Step("Talk to the gateway.", DISPUTE_AND_FLOOD), Step("Replace it.", HIJACK)])

    def script(request):
        if not request["body"].get("tools"):  # the model's own requests from inside the sandbox (no tools offered)
            return Step("ack")
        return next(queue, Step("Done."))

    with ScriptedModelServer(script) as server:
        options = {"bin": str(binary), "base_url": server.url + "/v1", "api_key_env": "none", "model": "scripted"}
        runner = Run(RunOptions(TOY, "lite", "codex", out=tmp_path / "runs", data_root=data_root,
                                agent_options=options, keep_workspace=True), reg)
        result = runner.execute()
    assert result.state == "scored", result.error
    events = read_events(runner.run_dir / "trajectory.jsonl")
    steps = [e for e in events if e["type"] == "tool" and e.get("observed_by") == "gateway"]
    assert [s["turn"] for s in steps] == [1, 2, 3]  # the hijack's own answer never reached the gateway
    assert steps[0]["disputed"] and steps[0]["exit_code"] is None  # answered twice, differently
    assert "flood" in steps[2]["stdout"]
    gateway = next(e for e in events if e["type"] == "model_gateway")
    # the program's transcript shows the hijacked step ran (and the forged ones): none of them is a step
    unseen = gateway["reported"]["unseen"]
    assert any("touch /workspace/HIJACKED" in u for u in unseen), unseen
    assert "python3 count.py case_00" in unseen and gateway["reported"]["unseen_steps"] == 3
    assert not [e for e in events if e["type"] == "tool" and e.get("code", "").startswith("touch /workspace/HIJ")]
    assert json.loads((runner.run_dir / "pilot_checks.json").read_text()) == []
    stages = {s.stage: s.score for s in result.stages}
    assert stages["S3"] == 0.0 and stages["S4"] == 1.0, stages
    assert gateway["observed"]["disputed"] == 1 and gateway["observed"]["side_replies"] >= 1
    assert len(server.requests) <= task.max_turns - 1  # nothing past the turn budget reached the model
    assert any("never saw" in e.get("note", "") for e in events)


FORGER = r"""#!/bin/sh
# No model call at all: one case's output written directly, and a transcript claiming a checked pilot and a batch.
mkdir -p /workspace/outputs/case_00 && printf 4 > /workspace/outputs/case_00/answer.txt
step() {  # one Bash tool use and its successful result, in Claude Code's stream-json
  printf '{"type":"assistant","message":{"content":[{"type":"tool_use","id":"%s","name":"Bash",' "$1"
  printf '"input":{"command":"%s"}}]}}\n' "$2"
  printf '{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"%s",' "$1"
  printf '"content":"%s","is_error":false}]}}\n' "$3"
}
step t1 "python3 count.py case_00" "wrote 1 answers"
step t2 "python3 -c 'print(len(files), x.isdigit(), n <= len(word))'" "1 True True"
step t3 "python3 count.py" "wrote 6 answers"
printf '{"type":"result","subtype":"success","is_error":false,"result":"done"}\n'
"""


def test_a_forged_transcript_earns_nothing(reg, data_root, tmp_path):
    """A program that never asks its model anything, writes one case's output itself and a transcript of a
    checked pilot: no step is recorded (the gateway saw none), so no pilot and no S2 evidence. (Before, the
    session call itself counted as an unchecked one-case pilot: S3 0.2, S2 0.2.)"""
    (tmp_path / "prog").mkdir()
    fake = tmp_path / "prog" / "forger"
    fake.write_text(FORGER)
    fake.chmod(0o755)
    register_toy_track()
    options = {"bin": str(fake), "base_url": "http://127.0.0.1:9", "api_key_env": "none"}
    runner = Run(RunOptions(TOY, "lite", "claude-code", out=tmp_path / "runs", data_root=data_root,
                            agent_options=options), reg)
    result = runner.execute()
    assert result.state == "scored", result.error
    stages = {s.stage: s.score for s in result.stages}
    assert stages["S3"] == 0.0 and stages["S2"] == 0.0, stages
    assert json.loads((runner.run_dir / "pilot_checks.json").read_text()) == []
    events = read_events(runner.run_dir / "trajectory.jsonl")
    steps = [e for e in events if e["type"] == "tool" and e.get("name") == "execute_code" and not e.get("session")]
    assert steps == []
    gateway = next(e for e in events if e["type"] == "model_gateway")
    assert gateway["calls"] == 0 and gateway["reported"]["unseen_steps"] == 3
    assert any("3 step(s) the model gateway never saw" in e.get("note", "") for e in events)


@pytest.mark.slow
@pytest.mark.usefixtures("amb_docker")
def test_installed_systems_run_in_the_docker_sandbox_with_their_folders_bound(reg, data_root, tmp_path, chat_stages):
    """Codex (its static program, no Node) in the agent container: its npm prefix is bound read-only at its host
    path below /root, which the image keeps to root (the sandbox puts a skeleton of folders there); the gateway's
    socket is reached through the workspace mount. Same plan, same scores as the chat agent."""
    binary = _install("codex")
    script, steps = toy_script(reg, Step("Done."))
    with ScriptedModelServer(script) as server:
        options = {"bin": str(binary), "base_url": server.url + "/v1", "api_key_env": "none", "model": "scripted"}
        runner = Run(RunOptions(TOY, "lite", "codex", sandbox="docker", out=tmp_path / "runs", data_root=data_root,
                                agent_options=options), reg)
        result = runner.execute()
    assert result.state == "scored" and result.end_reason == "submitted", result.error
    assert {s.stage: s.score for s in result.stages} == chat_stages
    events = read_events(runner.run_dir / "trajectory.jsonl")
    calls = [e for e in events if e["type"] == "tool" and e.get("observed_by") == "gateway"]
    assert len(calls) == steps and all(c["exit_code"] == 0 for c in calls)
    session = next(e for e in events if e.get("session"))
    assert "codex-linux-" in session["code"] and "codex.js" not in session["code"]  # the static program
    assert not list(Path(tempfile.gettempdir()).glob("automedbench-programs-*"))  # the skeleton is gone


def test_an_unreadable_transcript_ends_the_run_as_the_agents_failure(reg, data_root, tmp_path):
    (tmp_path / "prog").mkdir()
    fake = tmp_path / "prog" / "fake-claude"
    fake.write_text("#!/bin/sh\necho 'not a transcript'\necho 'env: node: No such file' >&2\nexit 0\n")
    fake.chmod(0o755)
    register_toy_track()
    options = {"bin": str(fake), "base_url": "http://127.0.0.1:9", "api_key_env": "none"}
    result = Run(RunOptions(TOY, "lite", "claude-code", out=tmp_path / "runs", data_root=data_root,
                            agent_options=options), reg).execute()
    assert result.state == "agent_failure" and "transcript could not be read" in result.error
    assert result.error.endswith("its last error line: env: node: No such file")
