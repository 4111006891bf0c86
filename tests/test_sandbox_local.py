"""The local sandbox beyond the conformance suite (test_sandbox_conformance.py): memory, exact timeout and
cap behaviour, the tripwire, and what the plain fallback says about itself."""

from __future__ import annotations

import os
import time

import pytest
from automedbench.sandbox import SandboxSpec
from automedbench.sandboxes.local import LocalSandbox, bwrap_path
from automedbench.tripwire import Tripwire, plant_decoys

needs_bwrap = pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap (bwrap) not usable on this machine")


@pytest.fixture()
def layout(tmp_path):
    (tmp_path / "ws").mkdir()
    (tmp_path / "public" / "c1").mkdir(parents=True)
    (tmp_path / "public" / "c1" / "ct.txt").write_text("input")
    (tmp_path / "private" / "c1").mkdir(parents=True)
    (tmp_path / "private" / "c1" / "lesion.txt").write_text("SECRET-REFERENCE")
    yield tmp_path
    for opened in OPENED.pop(tmp_path, []):  # closed again after a test that closed it: close() is idempotent
        opened.close()


OPENED: dict = {}  # layout -> the sessions `session` opened on it, closed when the layout's test ends


def session(layout, isolation="auto", **kw):
    decoy = plant_decoys(layout / "private", layout / "decoy")
    spec = SandboxSpec(layout / "ws", layout / "public", decoys={"/data/private": decoy}, **kw)
    opened = LocalSandbox(isolation).open(spec)
    OPENED.setdefault(layout, []).append(opened)
    return opened, decoy


@needs_bwrap
def test_network_task_gets_its_own_namespace_without_host_loopback(layout):
    """With network allowed: outbound through slirp4netns (default route on tap0), not the host's loopback."""
    import socket

    from automedbench.sandboxes import netns

    if netns.unsupported():
        pytest.skip(netns.unsupported())
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.1)
    port = listener.getsockname()[1]
    s, _ = session(layout, network=True)
    try:
        r = s.execute("python", "import socket\nfor host in ('127.0.0.1', '10.0.2.2'):\n"
                                "    c = socket.socket()\n    c.settimeout(2)\n"
                                f"    print(host, c.connect_ex((host, {port})))\n"
                                "print(open('/proc/net/route').read())\nprint(open('/etc/resolv.conf').read())", 20)
        assert r.exit_code == 0, r.stderr
        codes = dict(line.split() for line in r.stdout.splitlines()[:2])
        assert codes["127.0.0.1"] != "0" and codes["10.0.2.2"] != "0"
        with pytest.raises(TimeoutError):
            listener.accept()
        routes = [line.split() for line in r.stdout.splitlines() if line.startswith("tap0")]
        assert any(fields[1] == "00000000" for fields in routes)  # a default route through slirp4netns
        assert f"nameserver {netns.SLIRP_DNS}" in r.stdout
        assert any("slirp4netns" in p for p in s.protections()[0])
        helpers = [s.net.holder.pid, s.net.slirp.pid]
    finally:
        s.close()
        listener.close()
    for pid in helpers:  # slirp4netns and the namespace's holder end with the session
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_environment_is_scrubbed(layout, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    s, _ = session(layout)
    r = s.execute("bash", "env", 10)
    assert "sk-should-not-leak" not in r.stdout
    assert "HOME=" + s.workspace_dir + "/.home" in r.stdout


def test_timeout_kills_the_whole_process_group(layout):
    s, _ = session(layout)
    started = time.monotonic()
    r = s.execute("bash", "sleep 60 & sleep 60 & wait", 1)
    assert r.timed_out and r.exit_code == -9
    assert time.monotonic() - started < 10
    assert "TIMEOUT" in r.stderr


def test_memory_limit(layout):
    s, _ = session(layout, memory_mb=512)
    r = s.execute("python", "x = bytearray(2 * 1024 ** 3)\nprint('allocated')", 20)
    assert r.exit_code != 0 and "allocated" not in r.stdout
    assert "MemoryError" in r.stderr


def test_runaway_output_is_capped(layout):
    s, _ = session(layout, output_cap_bytes=1 << 16)
    r = s.execute("python", "import sys\nfor i in range(200000):\n    sys.stdout.write('y' * 99 + '\\n')\n"
                            "print('THE-END')", 30)
    assert r.capped and r.stdout_bytes == 200000 * 100 + 8
    assert len(r.stdout) < 70_000 and r.stdout.rstrip().endswith("THE-END")


@pytest.mark.parametrize("isolation", ["auto", "none"])
def test_tripwire_sees_reads_of_decoys_and_private(layout, isolation):
    if isolation == "auto" and bwrap_path() is None:
        pytest.skip("bubblewrap not usable")
    s, decoy = session(layout, isolation)
    wire = Tripwire()
    if not wire.active:
        pytest.skip("inotify unavailable")
    wire.watch_tree(decoy)
    wire.watch_tree(layout / "private")
    s.execute("bash", "ls /data/public; cat /data/public/c1/ct.txt", 10)
    assert wire.drain() == []  # reading public data is not a breach
    target = "/data/private/c1/lesion.txt" if isolation == "auto" else f"{layout}/private/c1/lesion.txt"
    # obfuscated path: the tripwire watches inodes, not strings
    code = "p = ''.join(chr(c) for c in " + str([ord(ch) for ch in target]) + ")\nprint(open(p).read())"
    s.execute("python", code, 10)
    touched = wire.drain()
    assert any(t.endswith("c1/lesion.txt") for t in touched), touched
    wire.close()


def test_plain_fallback_says_what_it_does_not_protect(layout):
    s, _ = session(layout, "none")
    _protections, gaps = s.protections()
    assert any("no filesystem isolation" in g for g in gaps)
    assert s.workspace_dir == str(layout / "ws")
    assert os.path.isdir(s.workspace_dir)


def test_a_bwrap_probe_that_times_out_is_asked_again_not_taken_as_no_bwrap(monkeypatch):
    """Under load the probe's first try may time out; that is no answer, and a run must not silently drop to
    the unisolated sandbox (seen: a brief rendered for the plain sandbox beside a bubblewrap session)."""
    import subprocess

    from automedbench.sandboxes import local

    calls = []

    def slow_then_fine(cmd, **kwargs):
        calls.append(kwargs["timeout"])
        if len(calls) == 1:
            raise subprocess.TimeoutExpired(cmd, kwargs["timeout"])
        return subprocess.CompletedProcess(cmd, 0, b"", b"")

    monkeypatch.setattr(local.shutil, "which", lambda name: "/usr/bin/bwrap-under-test")
    monkeypatch.setattr(local.subprocess, "run", slow_then_fine)
    local._bwrap_probe.cache_clear()
    try:
        assert local.bwrap_path() == "/usr/bin/bwrap-under-test"
        assert local.bwrap_path() == "/usr/bin/bwrap-under-test"  # probed once: the second answer is the first
        assert calls == list(local.BWRAP_PROBE_TIMEOUTS)

        def always_slow(cmd, **kwargs):
            raise subprocess.TimeoutExpired(cmd, kwargs["timeout"])

        monkeypatch.setattr(local.shutil, "which", lambda name: "/usr/bin/other-bwrap")
        monkeypatch.setattr(local.subprocess, "run", always_slow)
        with pytest.raises(RuntimeError, match="not falling back"):
            local.bwrap_path()
    finally:
        local._bwrap_probe.cache_clear()
