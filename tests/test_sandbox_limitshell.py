"""A local call's cgroups and rlimits set by a shell before it execs (sandboxes/limitshell.py), so that the
harness starts a bubblewrap call without fork(): the limits hold as they did under `preexec_fn`."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest
from automedbench.sandbox import SandboxSpec
from automedbench.sandboxes import limitshell, local, seccomp
from automedbench.sandboxes.local import LocalSandbox, bwrap_path

REPORT = ("import json, os, resource; print(json.dumps([os.getpid(), resource.getrlimit(resource.RLIMIT_AS), "
          "resource.getrlimit(resource.RLIMIT_CORE)]))")


def test_prefix_joins_each_group_and_sets_the_limits_before_the_command(tmp_path):
    groups = [tmp_path / "pids.procs", tmp_path / "memory.procs"]
    prefix = limitshell.limits_prefix(groups, 3 << 30)
    assert prefix is not None
    out = subprocess.run([*prefix, sys.executable, "-I", "-S", "-c", REPORT], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    pid, space, core = json.loads(out.stdout)
    assert [g.read_text().strip() for g in groups] == [str(pid), str(pid)]  # the exec'd command's own pid
    assert space == [3 << 30, 3 << 30] and core == [0, 0]


def test_no_address_space_limit_leaves_it_as_it_was(tmp_path):
    out = subprocess.run([*limitshell.limits_prefix([], 0), sys.executable, "-I", "-S", "-c", REPORT],
                         capture_output=True, text=True, timeout=60)
    import resource

    assert json.loads(out.stdout)[1] == list(resource.getrlimit(resource.RLIMIT_AS))


def test_a_group_it_cannot_join_stops_the_command_before_it_runs(tmp_path):
    marker = tmp_path / "ran"
    prefix = limitshell.limits_prefix([tmp_path / "missing" / "cgroup.procs"], 1 << 30)
    out = subprocess.run([*prefix, "touch", str(marker)], capture_output=True, timeout=60)
    assert out.returncode == 125 and not marker.exists()


def test_no_shell_means_no_prefix(monkeypatch, tmp_path):
    monkeypatch.setattr(limitshell, "SHELL", str(tmp_path / "no-sh"))
    assert limitshell.limits_prefix([], 1 << 30) is None


@pytest.mark.skipif(bwrap_path() is None or seccomp.supported() is not None,
                    reason="needs bubblewrap and the x86_64 seccomp filter")
def test_a_bubblewrap_call_starts_without_fork_and_inside_its_limits(tmp_path, monkeypatch):
    """No preexec_fn (so Python vforks), yet the call is in the session's cgroups and under its RLIMIT_AS."""
    seen: list[dict] = []
    real = subprocess.Popen

    def recording(*args, **kwargs):
        seen.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(local.subprocess, "Popen", recording)
    (tmp_path / "ws").mkdir()
    (tmp_path / "pub").mkdir()
    session = LocalSandbox("auto").open(SandboxSpec(tmp_path / "ws", tmp_path / "pub", memory_mb=2048))
    try:
        members: dict[str, list[int]] = {"pids": [], "memory": []}

        def watch() -> None:  # the groups' members while the call sleeps
            for _ in range(100):
                members["pids"] = members["pids"] or session.pids.pids()
                members["memory"] = members["memory"] or session.memory.pids()
                if all(members.values()):
                    return
                time.sleep(0.05)

        watcher = threading.Thread(target=watch)
        watcher.start()
        r = session.execute("python", "import resource, time\nprint(resource.getrlimit(resource.RLIMIT_AS))\n"
                                      "time.sleep(2)", 60)
        watcher.join()
        assert r.exit_code == 0, r.stderr
        assert r.stdout.strip() == str((2048 << 20, 2048 << 20))
        assert seen and all(kw.get("preexec_fn") is None for kw in seen)
        assert "a fresh, empty session keyring per call" not in session.protections()[0]
        for name in ("pids", "memory"):
            if getattr(session, name).available:
                assert members[name], f"the call's processes were never in the session's {name} group"
    finally:
        session.close()


# its session keyring's serial, or the errno of a refused keyctl
SESSION_KEYRING = ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                   "serial = libc.syscall({keyctl}, 0, -3, 0)\nprint(serial if serial > 0 else -ctypes.get_errno())")


@pytest.mark.skipif(local._keyctl_number() == 0, reason="keyctl's number unknown on this machine")
def test_a_plain_call_starts_without_fork_with_a_fresh_session_keyring_of_its_own(tmp_path, monkeypatch):
    """plainns joins a new session keyring for each call (before its filter, which since stop 50 refuses the keyring
    calls to the call's code, EPERM): the call neither sees the harness's keyring nor can add to its user's."""
    import ctypes

    if local.plain_namespace_unsupported(str(local.state_dir())):
        pytest.skip("local-plain refused here")
    seen: list[dict] = []
    real = subprocess.Popen
    monkeypatch.setattr(local.subprocess, "Popen", lambda *a, **kw: seen.append(kw) or real(*a, **kw))
    (tmp_path / "ws").mkdir()
    (tmp_path / "pub").mkdir()
    session = LocalSandbox("none").open(SandboxSpec(tmp_path / "ws", tmp_path / "pub", memory_mb=2048))
    probe = SESSION_KEYRING.format(keyctl=local._keyctl_number())
    try:
        serials = []
        for _ in range(2):
            r = session.execute("python", probe, 60)
            assert r.exit_code == 0, r.stderr
            serials.append(int(r.stdout))
        assert "a fresh, empty session keyring per call" in session.protections()[0]
    finally:
        session.close()
    harness = ctypes.CDLL(None, use_errno=True).syscall(local._keyctl_number(), 0, -3, 0)
    assert harness > 0 and serials == [-1, -1]  # EPERM: the call cannot reach any keyring, the harness's included
    assert seen and all(kw.get("preexec_fn") is None for kw in seen)
