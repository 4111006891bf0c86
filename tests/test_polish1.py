"""Robustness polish, each finding proved by a test here.

- **Cgroups left by dead harness processes** (sandboxes/cgroup.py): a harness SIGKILLed (or OOM-killed) mid-run
  never closed its session's pids and memory groups; 67 + 69 empty `automedbench-<pid>-*` groups of dead pids sat in
  /sys/fs/cgroup on this machine. A new session's start now removes the empty ones whose owner pid is gone, and
  keeps a live process's.
- **An unreadable data root was a traceback** (runner._needs_line, staging.ensure): a task folder this user may
  not read raised PermissionError out of `run`; now one line saying which file and what to do.
- **A base_url's credentials in error lines** (installed agents, the gateway, chat errors): the not-http(s) and
  cannot-be-resolved lines, and an HTTP library's error quoting the request URL, showed a base_url's
  user:password and ?api_key= as typed.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from automedbench.errors import AgentError
from automedbench.sandbox import SandboxSpec
from automedbench.sandboxes import cgroup
from automedbench.sandboxes.local import LocalSandbox
from automedbench_models.chat_common import with_retries
from automedbench_models.gateway import ModelGateway

ROOT = os.geteuid() == 0
V1 = all((root / "cgroup.procs").exists() for root in (cgroup.PIDS_ROOT, cgroup.MEMORY_ROOT))
INIT_NS = os.path.exists("/proc/self/ns/pid") and os.readlink("/proc/self/ns/pid") == "pid:[4026531836]"
needs_cgroups = pytest.mark.skipif(not (ROOT and V1 and INIT_NS),
                                   reason="needs root, cgroup v1 pids and memory, the initial PID namespace")
SECRETS = ("pa@word", "word@", "QSECRET")

HOLDER = """
import sys, time
from pathlib import Path
from automedbench.sandbox import SandboxSpec
from automedbench.sandboxes.local import LocalSandbox
ws, pub = Path(sys.argv[1]), Path(sys.argv[2])
session = LocalSandbox("none").open(SandboxSpec(ws, pub))
session.execute("bash", "true", 30)
print(session.pids.path, session.memory.path, flush=True)
if sys.argv[3] == "raise":
    raise RuntimeError("the harness failed mid-run")
time.sleep(120)
"""


def _holder(tmp_path: Path, mode: str) -> tuple[subprocess.Popen[str], list[Path]]:
    """A harness process with one open session; returns it and its session's groups."""
    for sub in ("ws", "pub"):
        (tmp_path / sub).mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # a SIGKILLed holder's call folder stays in the test's folder
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "ws"), str(tmp_path / "pub"), mode],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    assert len(line) == 2 and all(p.startswith("/sys/fs/cgroup/") for p in line), (line, proc.stderr.read())
    return proc, [Path(p) for p in line]


@needs_cgroups
def test_a_sessions_groups_are_gone_when_it_ends_closed_or_by_an_exception(tmp_path):
    for sub in ("ws", "pub"):
        (tmp_path / sub).mkdir()
    session = LocalSandbox("none").open(SandboxSpec(tmp_path / "ws", tmp_path / "pub"))
    groups = [session.pids.path, session.memory.path]
    assert all(g is not None and g.is_dir() for g in groups)
    session.close()
    assert not any(g.exists() for g in groups if g is not None)
    proc, groups = _holder(tmp_path, "raise")  # an uncaught exception ends the harness process
    assert proc.wait(timeout=60) == 1
    assert not any(g.exists() for g in groups), groups


@needs_cgroups
def test_a_killed_harnesss_groups_are_reaped_at_the_next_session_start_and_a_live_ones_kept(tmp_path):
    proc, dead = _holder(tmp_path, "sleep")
    proc.kill()
    proc.wait(timeout=60)
    assert all(g.is_dir() for g in dead), dead  # SIGKILL: nothing of the harness unwound
    live_owner = subprocess.Popen(["sleep", "120"])
    live = cgroup.PIDS_ROOT / f"automedbench-{live_owner.pid}-abc123"
    live.mkdir()
    session = None
    try:
        session = LocalSandbox("none").open(SandboxSpec(tmp_path / "ws", tmp_path / "pub"))
        assert not any(g.exists() for g in dead), dead
        assert live.is_dir() and session.pids.path is not None and session.pids.path.is_dir()
        assert cgroup.reap_stale(cgroup.PIDS_ROOT) == []  # nothing of a live process (this one's session) either
        assert session.pids.path.is_dir()
    finally:
        if session is not None:
            session.close()
        live.rmdir()
        live_owner.send_signal(signal.SIGKILL)
        live_owner.wait()


@pytest.mark.skipif(not ROOT or shutil.which("setpriv") is None, reason="needs root and setpriv to run as nobody")
def test_an_unreadable_data_root_is_one_line_through_the_cli(tmp_path):
    """As a user who may not read the task's data folder: `run` ended in a PermissionError traceback."""
    data = tmp_path / "data"
    (data / "toy" / "vowels").mkdir(parents=True)
    (data / "toy").chmod(0o700)  # root's, unreadable by nobody
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o777)
    tmp_path.chmod(0o755)
    cli = Path(sys.executable).parent / "automedbench"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOMEDBENCH")}
    done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(cli), "run", "--task",
                           "toy/vowels", "--agent", "scripted", "--data-root", str(data), "--out", str(home / "runs")],
                          capture_output=True, text=True, timeout=300, env={**env, "HOME": str(home)})
    out = done.stdout + done.stderr
    assert done.returncode == 2 and "Traceback" not in out, out
    lines = [x for x in out.splitlines() if x.strip()]
    assert lines == [f"error: the data of toy/vowels under {data} cannot be used by this user: "
                     f"{data}/toy/vowels/staging.json: permission denied; name a data root of your own "
                     "(--data-root or AUTOMEDBENCH_DATA)"], out
    assert not (home / "runs").exists()


URL = "http://user:pa@word@127.0.0.1:9/v1?api_key=QSECRET&v=2"


@pytest.mark.parametrize("url", ["ftp://user:pa@word@host/v1?api_key=QSECRET",
                                 "http://user:pa@word@no-such-host.invalid/v1?api_key=QSECRET"])
def test_an_installed_agents_refused_base_url_is_shown_masked(tmp_path, url):
    """Through `run`: the not-http(s) and cannot-be-resolved lines showed the URL with its credentials."""
    cli = Path(sys.executable).parent / "automedbench"
    done = subprocess.run([str(cli), "run", "--task", "toy/vowels", "--agent", "mini-swe-agent", "--agent-option",
                           "bin=/bin/true", "--agent-option", "api_key_env=none", "--agent-option", f"base_url={url}",
                           "--data-root", str(tmp_path / "data"), "--out", str(tmp_path / "runs")],
                          capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode == 2 and "mini-swe-agent: " in out and "://***@" in out and "api_key=***" in out, out
    assert not any(secret in out for secret in SECRETS), out


def test_an_http_error_quoting_the_url_is_recorded_masked():
    """The recorded error of a chat call (result.json's `error`): httpx names the request's URL in its message."""
    request = httpx.Request("POST", URL + "/chat/completions")

    def call() -> None:
        raise httpx.HTTPStatusError("Client error '404 Not Found' for url '" + str(request.url) + "'",
                                    request=request, response=httpx.Response(404, request=request))

    with pytest.raises(AgentError) as caught:
        with_retries(call, attempts=0, backoff_s=0, max_backoff_s=0, what="openai call to x", sleep=lambda s: None)
    message = str(caught.value)
    assert "404 Not Found" in message and "127.0.0.1:9" in message, message
    assert not any(secret in message for secret in SECRETS), message


def test_the_gateway_refuses_a_base_url_with_its_credentials_masked():
    with pytest.raises(ValueError) as caught:
        ModelGateway("ftp://user:pa@word@host/v1?api_key=QSECRET", "openai", None, model="m", max_calls=1, deadline=0.0)
    assert "ftp://***@host" in str(caught.value) and not any(s in str(caught.value) for s in SECRETS)
