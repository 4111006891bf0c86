"""scripts/docker-up.sh and docker-down.sh share one daemon between test runs by reference count.

Driven entirely with a fake `dockerd` and a fake `docker` CLI in a temporary folder (the scripts take
both from environment variables), so the host's real engine is never touched."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FAKE_DOCKERD = """#!/bin/sh
echo $$ > "$FAKE_STATE/running"
echo started >> "$FAKE_STATE/starts"
trap 'rm -f "$FAKE_STATE/running"; exit 0' TERM
while :; do sleep 0.1; done
"""
FAKE_DOCKER = """#!/bin/sh
case "$1" in
  version) [ -f "$FAKE_STATE/running" ] && kill -0 "$(cat "$FAKE_STATE/running")" 2>/dev/null \\
             && { echo 99.0-fake; exit 0; }; exit 1 ;;
  ps) cat "$FAKE_STATE/containers" 2>/dev/null; exit 0 ;;
  rm) shift; echo "$@" >> "$FAKE_STATE/removed"; : > "$FAKE_STATE/containers"; exit 0 ;;
esac
exit 1
"""

needs_root = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("flock"),
                                reason="docker-up.sh starts a daemon only as root, and needs flock")


class Fakes:
    def __init__(self, tmp: Path) -> None:
        self.state = tmp / "state"
        self.state.mkdir()
        bin_dir = tmp / "bin"
        bin_dir.mkdir()
        for name, text in (("fake-dockerd", FAKE_DOCKERD), ("fake-docker", FAKE_DOCKER)):
            (bin_dir / name).write_text(text)
            (bin_dir / name).chmod(0o755)
        self.pidfile = tmp / "dockerd.pid"
        self.env = {**os.environ, "FAKE_STATE": str(self.state), "AUTOMEDBENCH_DOCKERD": str(bin_dir / "fake-dockerd"),
                    "AUTOMEDBENCH_DOCKER_CLI": str(bin_dir / "fake-docker"), "AUTOMEDBENCH_DOCKER_IMAGES": "0",
                    "AUTOMEDBENCH_DOCKERD_PIDFILE": str(self.pidfile), "AUTOMEDBENCH_DOCKERD_LOG": str(tmp / "log")}
        self.holders: list[subprocess.Popen] = []

    def holder(self) -> subprocess.Popen:
        """A process standing for one test run (scripts/test.sh) that holds the daemon."""
        proc = subprocess.Popen(["sleep", "600"])
        self.holders.append(proc)
        return proc

    def script(self, name: str, holder: subprocess.Popen) -> str:
        env = {**self.env, "AUTOMEDBENCH_DOCKER_HOLDER_PID": str(holder.pid)}
        done = subprocess.run(["bash", str(ROOT / "scripts" / name)], env=env, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def daemon_pid(self) -> int | None:
        path = self.state / "running"
        return int(path.read_text()) if path.is_file() else None

    def starts(self) -> int:
        path = self.state / "starts"
        return len(path.read_text().split()) if path.is_file() else 0

    def containers(self, *ids: str) -> None:
        (self.state / "containers").write_text("\n".join(ids) + "\n")

    def removed(self) -> str:
        path = self.state / "removed"
        return path.read_text() if path.is_file() else ""

    def cleanup(self) -> None:
        for proc in self.holders:
            proc.kill()
            proc.wait()
        pid = self.daemon_pid()
        if pid:
            os.kill(pid, 15)


@pytest.fixture
def fakes(tmp_path):
    made = Fakes(tmp_path)
    yield made
    made.cleanup()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def gone(pid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


@needs_root
def test_two_test_runs_share_one_daemon_and_the_last_one_stops_it(fakes):
    a, b = fakes.holder(), fakes.holder()
    fakes.containers("stale1")
    out = fakes.script("docker-up.sh", a)
    daemon = fakes.daemon_pid()
    assert daemon and fakes.starts() == 1 and "(1 holder(s))" in out
    assert int(fakes.pidfile.read_text()) == daemon
    assert "stale1" in fakes.removed()  # the first holder clears containers a crashed run left behind
    fakes.containers("live-of-a")
    out = fakes.script("docker-up.sh", b)
    assert fakes.starts() == 1 and fakes.daemon_pid() == daemon and "(2 holder(s))" in out
    assert "live-of-a" not in fakes.removed()  # never another run's live containers
    out = fakes.script("docker-down.sh", a)
    assert "still held by 1 other test run(s)" in out and alive(daemon)
    out = fakes.script("docker-down.sh", b)
    assert f"stopped dockerd {daemon}" in out and gone(daemon) and not fakes.pidfile.exists()


@needs_root
def test_a_crashed_holder_does_not_keep_the_daemon_alive(fakes):
    a, b = fakes.holder(), fakes.holder()
    fakes.script("docker-up.sh", a)
    daemon = fakes.daemon_pid()
    a.kill()
    a.wait()  # test run A died without docker-down.sh
    fakes.containers("left-by-a")
    out = fakes.script("docker-up.sh", b)
    assert "(1 holder(s))" in out and "left-by-a" in fakes.removed()
    out = fakes.script("docker-down.sh", b)
    assert "stopped dockerd" in out and gone(daemon)


@needs_root
def test_a_daemon_the_scripts_did_not_start_is_never_stopped(fakes):
    external = subprocess.Popen(["sh", fakes.env["AUTOMEDBENCH_DOCKERD"]], env=fakes.env)
    try:
        deadline = time.monotonic() + 10
        while fakes.daemon_pid() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        a = fakes.holder()
        out = fakes.script("docker-up.sh", a)
        assert "engine 99.0-fake" in out and fakes.starts() == 1 and not fakes.pidfile.exists()
        fakes.script("docker-down.sh", a)
        assert external.poll() is None  # still running
    finally:
        external.terminate()
        external.wait(timeout=10)


def test_each_checkout_stages_into_its_own_data_folder(monkeypatch, tmp_path):
    from types import SimpleNamespace

    from automedbench.testing import pytest_configure

    monkeypatch.delenv("AUTOMEDBENCH_DATA", raising=False)
    pytest_configure(SimpleNamespace(rootpath=tmp_path / "checkout"))
    assert os.environ["AUTOMEDBENCH_DATA"] == str(tmp_path / "checkout" / ".data")
    pytest_configure(SimpleNamespace(rootpath=tmp_path / "other"))  # an explicit setting wins
    assert os.environ["AUTOMEDBENCH_DATA"] == str(tmp_path / "checkout" / ".data")
    assert "export AUTOMEDBENCH_DATA=${AUTOMEDBENCH_DATA:-$PWD/.data}" in (ROOT / "scripts" / "test.sh").read_text()
