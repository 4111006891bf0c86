"""Items named at the last stop and mended here, each through the path a user takes.

1. An installed program's gateway and a chat agent's watch settle "calls failed, the program gave up before
   `outage_after`" by one rule (`ProviderHealth.confirm`): the gateway had counted a call below 400 as getting
   through and only transport failures as failing, so a provider answering every call 500 was never an outage for
   an installed program while it was one for a chat agent. A liveness GET answered 5xx while an honest reply is
   merely slow no longer declares the provider down.
2. `outage_after` is bounded by one check in one message, its default one constant.
3. A hook implementation is given only the arguments it names, by one helper (`call_hook`) for every hook.
4. A run's identity (its id and signed trajectory) is named in one place (`run_identity`) for the leaderboard and
   judge-agreement.
5. A plain call that cannot join a fresh session keyring is refused, and the run ends as the agent's failure.
6. Commands that printed with click.echo exit 0 quietly when the reader goes away (`| head -1`).
"""

from __future__ import annotations

import os
import platform
import shutil
import time
import types
from typing import Any

import pytest
import test_agents_round1
import test_cli_newuser
from automedbench.api import OUTAGE_AFTER_S, ModelConfig
from automedbench_models.gateway import ModelGateway
from automedbench_models.providerhealth import ProviderHealth, ServerError
from test_agents_round1 import CHAT_REPLY, Provider, _run
from test_agents_round2 import _options
from test_agents_round2 import _run as _run_chat
from test_installed_agents_runs import _post
from test_ux_round18 import _one_line

cli = test_cli_newuser.cli
stub = test_agents_round1.stub
gateway = test_agents_round1.gateway

# ------------------------------------------------------------------ 1. one rule for "the provider is down"


def test_an_installed_program_giving_up_on_a_provider_answering_500_is_an_outage_as_for_a_chat_agent(
        cli, tmp_path, stub):
    """Every call and the harness's own GET answered 500, the program stops after 3 tries (the wait is 60 s). Before,
    the gateway saw no transport failure and called it the session's own end; a chat agent's watch called the same
    an outage. Now both: the provider never answered, a retryable outage."""
    with Provider("error") as provider:
        _, record, wall = _run(cli, tmp_path, stub, provider.url, "--agent-option", "args=--tries=3", wait="60")
    assert wall < 30, wall
    assert (record["state"], record["end_reason"]) == ("infrastructure_failure", "provider_unavailable"), record
    assert "3 call(s) failed over " in record["error"] and "HTTP 500" in record["error"], record
    assert "failed too (HTTP 500" in record["error"] and "the session was ended" not in record["error"], record


def test_a_slow_reply_is_waited_for_though_the_base_url_answers_503(gateway):
    """Before: after 1 s the watch probed, got 503 and declared the provider down, cutting the reply (a retryable
    outage from a working model). Now a server error decides nothing while that reply is due."""
    sock, start = gateway  # the provider may go 1 s without answering
    with Provider("sick", delay=2.5) as provider:
        gw = start(provider.url)
        status, data = _post(sock, "/v1/chat/completions", {"model": "m", "messages": []}, {})
    assert (status, data) == (200, CHAT_REPLY)
    assert gw.outage() == ("", False) and not gw.health.down


def test_a_chat_agents_slow_model_behind_a_503_root_is_waited_for(cli, tmp_path):
    """The same watch reads a chat agent's SDK client: each 2.5 s reply is waited for (outage_after is 1 s) though
    the base URL answers 503, and the run is scored as the model's turns make it, not a retryable outage."""
    with Provider("sick", delay=2.5) as provider:
        _, record, wall, _ = _run_chat(cli, tmp_path, "--agent", "openai", *_options("--agent-option", provider.url),
                                       "--max-turns", "2")
    assert wall < 30 and provider.posts >= 1, (wall, provider.posts)
    assert record["state"] == "scored", record


def _health(probe_answer: str, timeout_s: float = 0.2) -> tuple[ProviderHealth, list[str]]:
    cuts: list[str] = []
    return ProviderHealth(lambda: probe_answer, lambda: cuts.append("cut"), timeout_s), cuts


def test_a_server_error_to_the_probe_still_decides_when_no_reply_is_due():
    """The 5xx exception is narrow: calls failing with nothing in flight (or a reply waited for only briefly) and a
    GET answered 503 is an outage; a reply due for `timeout_s` with a refused GET is one too."""
    health, cuts = _health(ServerError("HTTP 503 -"))
    health.waits(1, "reply")
    health.failed(2, "HTTP 500 -")
    assert health.confirm().endswith("failed too (HTTP 503 -)") and cuts == ["cut"]  # request 1 waited ~0 s
    health, cuts = _health("the connection was refused (ConnectionRefusedError)")
    health.waits(1, "reply")
    time.sleep(0.25)
    assert health._judge("no reply") and cuts == ["cut"]
    health, cuts = _health(ServerError("HTTP 503 -"))
    health.waits(1, "reply")
    time.sleep(0.25)
    assert health._judge("no reply") == "" and cuts == [] and not health.down


# ------------------------------------------------------------------ 2. outage_after: one bound, one default


@pytest.mark.parametrize("value", ["0", "100000"])
def test_outage_after_is_refused_in_the_same_words_for_an_installed_and_a_chat_agent(cli, tmp_path, stub, value):
    installed = cli("run", "--task", "toy/vowels", "--agent", "mini-swe-agent", "--agent-option", "api_key_env=none",
                    "--agent-option", f"bin={stub}", "--agent-option", f"outage_after={value}",
                    "--out", tmp_path / "a")
    chat = cli("run", "--task", "toy/vowels", "--agent", "openai",
               *_options("--agent-option", "http://127.0.0.1:9/v1", wait=value), "--out", tmp_path / "b")
    said = f"outage_after must be a number of seconds from 1 to 86400 (got {value})"
    _one_line(installed, f"mini-swe-agent: {said}")
    _one_line(chat, f"openai: {said}")


def test_the_default_wait_is_one_constant():
    gw = ModelGateway("http://127.0.0.1:9/v1", "openai", None, model="m", max_calls=1, deadline=time.monotonic() + 5)
    assert ModelConfig("openai").outage_after == gw.health.timeout_s == OUTAGE_AFTER_S == 60.0


# ------------------------------------------------------------------ 3. a hook implementation gets what it names


def test_a_commands_hook_taking_only_the_context_is_called_as_pluggy_would():
    """pluggy lets an implementation name any of its hook's arguments. The run hooks were called that way; the commands
    hook gave `cli` to every implementation, so one taking only `context` failed with a TypeError (a plugin
    problem). One helper (`call_hook`) calls them all."""
    from automedbench.engine import CommandContext
    from automedbench.hookspecs import hookimpl
    from automedbench.plugins import Registry

    given: list[Any] = []
    module = types.ModuleType("amb_context_only")

    @hookimpl
    def automedbench_register_commands(context):
        given.append(context)

    module.automedbench_register_commands = automedbench_register_commands  # type: ignore[attr-defined]
    reg = Registry()
    reg.add_plugin(module, name="amb-context-only", distribution="amb-context-only-dist")
    context = CommandContext(None, None, lambda: reg, lambda _: None)
    reg.commands(context=context)
    assert given == [context] and not [p for p in reg.problems if p.plugin == "amb-context-only"], reg.problems


# ------------------------------------------------------------------ 4. a run's identity, in one place


def test_a_runs_identity_is_its_id_and_signed_trajectory_or_none():
    from automedbench.engine import RunFolder, run_identity

    assert run_identity("r1", {RunFolder.TRAJECTORY: "ab" * 32, "judge.json": "cd"}) == ("r1", "ab" * 32)
    # no signed trajectory: nothing ties two results to one execution (judge-agreement keyed these as (id, ""))
    assert run_identity("r1", {"judge.json": "cd"}) is None
    assert run_identity("r1", {RunFolder.TRAJECTORY: ""}) is None


def test_the_leaderboard_and_judge_agreement_name_a_run_alike(cli, tmp_path):
    """The leaderboard's row and judge-agreement's verified copy of one run give the same identity."""
    from automedbench.engine import RunFolder, copy_verified, run_identity
    from automedbench_campaign.store import read_summary

    made = cli("run", "--task", "toy/vowels", "--agent", "reference", "--out", tmp_path / "runs")
    assert made.exit_code == 0, made.output
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    row = read_summary(run_dir)
    (tmp_path / "copy").mkdir()
    found = copy_verified(RunFolder(run_dir), tmp_path / "copy")
    assert not isinstance(found, str), found
    copy, signed = found
    assert row["identity"] == run_identity(copy.load_result().header.run_id, signed) == \
        (row["run_id"], signed[RunFolder.TRAJECTORY])


# ------------------------------------------------------------------ 5. no fresh session keyring: the call is refused

# As a user of its own (its key quota is its own: 200 keys, 20000 bytes), fill the quota from a session keyring of
# that user's, then start plainns as a plain call would: its keyctl(JOIN_SESSION_KEYRING) fails with EDQUOT.
FILL_QUOTA = r'''
import ctypes, errno, os, sys
uid, keyctl, add_key = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
os.setgroups([]); os.setgid(uid); os.setuid(uid)
libc = ctypes.CDLL(None, use_errno=True)
if libc.syscall(keyctl, 1, None) < 0:
    sys.exit("join: " + os.strerror(ctypes.get_errno()))
n = 0
for size in (512, 64, 8, 1):  # big keys, then smaller ones until not even a byte is left
    while True:
        n += 1
        if libc.syscall(add_key, b"user", str(n).encode(), b"x" * size, size, -3) < 0:
            if ctypes.get_errno() != errno.EDQUOT:
                sys.exit("add_key: " + os.strerror(ctypes.get_errno()))
            break
os.execv(sys.argv[4], [sys.argv[4], "-I", "-S", *sys.argv[5:]])  # plainns needs only the standard library
'''
ADD_KEY = {"x86_64": 248, "aarch64": 217}


def test_a_full_key_quota_refuses_the_plain_call_instead_of_keeping_the_harnesss_keyring(tmp_path):
    """Before: the failed join was ignored and the call went on in the harness's session keyring (here, as a user
    with no right to mount, it then failed at the first mount, for another reason). Now it is refused, first."""
    import subprocess
    import sys

    from automedbench.sandboxes import local, plainns

    machine = platform.machine()
    python = "/usr/bin/python3"  # one any user may run (the test's own may sit in root's home)
    if os.geteuid() != 0 or machine not in ADD_KEY or not local.SYS_KEYCTL.get(machine) or \
            not os.access(python, os.X_OK):
        pytest.skip("needs root (to become a user of its own), a system python and known keyring syscall numbers")
    uid = 60_000 + os.getpid() % 5_000  # no one else's quota
    spec = local.plain_spec(tmp_path, local.SYS_KEYCTL[machine])
    done = subprocess.run([sys.executable, "-c", FILL_QUOTA, str(uid), str(local.SYS_KEYCTL[machine]),
                           str(ADD_KEY[machine]), python, plainns.__file__, spec, "--", "true"],
                          capture_output=True, text=True, timeout=60, cwd="/")
    assert done.returncode == 125, (done.returncode, done.stderr)
    assert done.stderr.startswith(plainns.KEYRING_REFUSED) and "Disk quota exceeded" in done.stderr, done.stderr


def test_a_refused_keyring_ends_the_run_as_the_agents_failure(reg, data_root, tmp_path, monkeypatch):
    """The quota is per user and an agent's earlier call can fill it (keys linked to the user keyring outlive the
    call): the run ends as the agent's failure, never a retryable infrastructure failure. The failed join is
    simulated here (a keyctl number no kernel has: ENOSYS), through the real runner and plainns."""
    from automedbench.sandboxes import local, plainns
    from automedbench.testing import StepsAgent, register_agent, register_toy_track, run_task

    if not local._keyctl_number():
        pytest.skip("no keyctl syscall number known here")
    monkeypatch.setattr(local, "_keyctl_number", lambda: 99_999)
    register_toy_track()
    register_agent(StepsAgent, reg)
    out = tmp_path / "runs"
    out.mkdir()
    result, _ = run_task("toy/vowels", StepsAgent.name, out=out, data_root=data_root, sandbox="local-plain",
                         agent_options={"steps": [["bash", "echo never"]]})
    assert (result.state, result.end_reason) == ("agent_failure", "agent_error"), (result.state, result.error)
    assert result.error.startswith(plainns.KEYRING_REFUSED), result.error


def test_a_bubblewrap_call_without_the_filter_is_refused_alike(tmp_path):
    """Under bubblewrap without the seccomp filter the child joins the fresh keyring itself (`preexec_fn`), and
    ignored a failure the same way: the call ran in the harness's keyring. Refused alike now (the failed join
    simulated: the session's joiner answers why it could not)."""
    from automedbench.errors import AgentError
    from automedbench.sandbox import SandboxSpec
    from automedbench.sandboxes import plainns
    from automedbench.sandboxes.local import LocalSandbox, bwrap_path

    if bwrap_path() is None:
        pytest.skip("needs bubblewrap")
    (tmp_path / "ws").mkdir()
    (tmp_path / "pub").mkdir()
    session = LocalSandbox("auto").open(SandboxSpec(tmp_path / "ws", tmp_path / "pub"))
    try:
        session.seccomp_gap = "left out for the test"  # the keyring is then joined in the child, by `_keyring`
        session._keyring = lambda: "Disk quota exceeded"
        with pytest.raises(AgentError, match="Disk quota exceeded") as refused:
            session.execute("bash", "touch $WORKSPACE_DIR/ran", 60)
    finally:
        session.close()
    assert str(refused.value).startswith(plainns.KEYRING_REFUSED) and not (tmp_path / "ws" / "ran").exists()


# ------------------------------------------------------------------ 6. a reader gone away is no failure


@pytest.mark.parametrize("args", [["verify", "--show-key"], ["images", "list"], ["show", "{run}", "--json"]])
def test_a_command_printing_to_a_closed_pipe_exits_0_quietly(cli, tmp_path, args):
    """`automedbench show RUN --json | head -1`: click.echo raised EPIPE and click exited 1 (the run command's
    consoles already dropped their output and went on). Now those commands print through the console too."""
    import subprocess
    import sys

    if "{run}" in args:
        made = cli("run", "--task", "toy/vowels", "--agent", "reference", "--out", tmp_path / "runs")
        assert made.exit_code == 0, made.output
        (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
        args = [str(run_dir) if a == "{run}" else a for a in args]
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line is written
    try:
        done = subprocess.run([sys.executable, "-c", "from automedbench.cli import main; main()", *args],
                              stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (0, ""), (done.returncode, done.stderr)


# a plain call links a key into its user's keyring (which outlives the call) and reads that keyring's size back
LINK_KEY = r"""
import ctypes, os, platform
libc = ctypes.CDLL(None, use_errno=True)
add_key = {"x86_64": 248}[platform.machine()]
made = libc.syscall(add_key, b"user", b"amb-left-behind", b"x" * 64, 64, -4)  # -4: KEY_SPEC_USER_KEYRING
print("add_key:", made if made >= 0 else "refused %d" % ctypes.get_errno())
"""


@pytest.mark.skipif(os.geteuid() != 0 or platform.machine() != "x86_64" or shutil.which("unshare") is None,
                    reason="a local-plain run as root (unshare), x86_64")
def test_a_plain_call_leaves_no_key_in_its_users_keyring_for_a_later_run(reg, data_root, tmp_path):
    """Before: the call's fresh session keyring kept the harness's from it, but `add_key` into its user's keyring
    (shared by every run of that user) was allowed: each key counts against the user's key quota, and once it is
    full every later plain call of that user is refused (another agent's run ended by this one). Now the plain
    call's filter refuses the keyring calls (EPERM), as bubblewrap's and docker's do; the run scores as before."""
    from automedbench.runfolder import RunFolder
    from automedbench.testing import StepsAgent, register_agent, register_toy_track, run_task

    register_toy_track()
    register_agent(StepsAgent, reg)
    out = tmp_path / "runs"
    out.mkdir()
    result, run_dir = run_task("toy/vowels", StepsAgent.name, out=out, data_root=data_root, sandbox="local-plain",
                               agent_options={"steps": [["python", LINK_KEY]]})
    call = next(e for e in RunFolder(run_dir).events() if e.get("type") == "tool" and e.get("name") == "execute_code")
    assert "add_key: refused 1" in call["stdout"], call["stdout"]
    assert result.state == "scored", (result.state, result.error)
