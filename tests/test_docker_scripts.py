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
                    "AUTOMEDBENCH_DOCKERD_PIDFILE": str(self.pidfile), "AUTOMEDBENCH_DOCKERD_LOG": str(tmp / "log"),
                    # never the status file of the test run this test is part of
                    "AUTOMEDBENCH_DOCKER_STATUS": str(tmp / "docker-status")}
        self.status = tmp / "docker-status"
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
def test_the_outcome_is_written_for_the_tests_that_wait_for_it(fakes):
    a = fakes.holder()
    assert not fakes.status.exists()
    fakes.script("docker-up.sh", a)  # engine up; images: AUTOMEDBENCH_DOCKER_IMAGES=0 in the fakes
    assert fakes.status.read_text() == "ready\n"
    fakes.script("docker-down.sh", a)
    fakes.env["AUTOMEDBENCH_DOCKER"] = "0"
    fakes.script("docker-up.sh", a)
    assert fakes.status.read_text() == "unavailable: AUTOMEDBENCH_DOCKER=0\n"
    assert not list(fakes.status.parent.glob("docker-status.tmp*"))  # written atomically, nothing left


def test_a_docker_test_waits_for_the_background_build_and_reads_its_outcome(monkeypatch, tmp_path):
    import threading

    from automedbench_testkit import dockercheck

    status = tmp_path / "docker-status"
    monkeypatch.setenv("AUTOMEDBENCH_DOCKER_STATUS", str(status))
    monkeypatch.setattr(dockercheck, "_docker_answer", [])
    threading.Timer(1.5, lambda: status.write_text("unavailable: dockerd did not come up\n")).start()
    started = time.monotonic()
    assert dockercheck.docker_unavailable(wait_s=30) == "dockerd did not come up"
    assert 1.0 < time.monotonic() - started < 20  # it waited for the file, and no longer
    assert dockercheck.docker_unavailable(wait_s=0) == "dockerd did not come up"  # asked once per process
    monkeypatch.setattr(dockercheck, "_docker_answer", [])
    status.unlink()
    assert "not ready after 1 s" in dockercheck.docker_unavailable(wait_s=1)  # bounded: a hung build is a reason


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

    for var in ("AUTOMEDBENCH_DATA", "AUTOMEDBENCH_STATE", "PYTEST_XDIST_WORKER", "AUTOMEDBENCH_XDIST_FOLDERS_FOR"):
        monkeypatch.delenv(var, raising=False)
    pytest_configure(SimpleNamespace(rootpath=tmp_path / "checkout"))
    assert os.environ["AUTOMEDBENCH_DATA"] == str(tmp_path / "checkout" / ".data")
    pytest_configure(SimpleNamespace(rootpath=tmp_path / "other"))  # an explicit setting wins
    assert os.environ["AUTOMEDBENCH_DATA"] == str(tmp_path / "checkout" / ".data")
    # a pytest-xdist worker takes its own subfolders (staging and the harness key are not shared), once
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    for _ in range(2):  # the hook is registered by more than one conftest
        pytest_configure(SimpleNamespace(rootpath=tmp_path / "checkout"))
    assert os.environ["AUTOMEDBENCH_DATA"] == str(tmp_path / "checkout" / ".data" / "gw1")
    assert os.environ["AUTOMEDBENCH_STATE"] == str(tmp_path / "checkout" / ".state" / "gw1")
    assert "export AUTOMEDBENCH_DATA=${AUTOMEDBENCH_DATA:-$PWD/.data}" in (ROOT / "scripts" / "test.sh").read_text()
