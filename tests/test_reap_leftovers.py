"""scripts/reap-test-leftovers.sh: after a tier (a timed-out one skips teardown) scripts/test.sh stops what
that tier started and left running, found by the exact mark in its environment, and nothing else."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "reap-test-leftovers.sh"


def detached(mark: str | None) -> subprocess.Popen:
    """A process in its own session (as `ray start` is), surviving its parent's end, carrying `mark`."""
    env = {k: v for k, v in os.environ.items() if k != "AUTOMEDBENCH_TEST_RUN"}
    if mark is not None:
        env["AUTOMEDBENCH_TEST_RUN"] = mark
    # ignores SIGTERM, like a node that will not stop politely: the script must still end it
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"
    return subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True)


def test_only_the_marked_processes_are_stopped(tmp_path):
    mark = f"slow-tier-{os.getpid()}-{time.time_ns()}"
    ours = [detached(mark), detached(mark)]
    others = [detached(None), detached(mark + "0"), detached("x" + mark), detached(f"fast-tier-{time.time_ns()}")]
    try:
        time.sleep(0.5)  # the interpreters have started (their environment is readable)
        done = subprocess.run(["bash", str(SCRIPT), mark, "the slow tier"], capture_output=True, text=True,
                              timeout=60, env={**os.environ, "AUTOMEDBENCH_REAP_GRACE_S": "1"})
        assert done.returncode == 0, done.stderr
        assert "2 process(es) the slow tier left running" in done.stdout
        for proc in ours:
            assert proc.wait(timeout=10) == -9  # SIGTERM ignored: killed after the grace time
        assert all(proc.poll() is None for proc in others)  # a prefix, a suffix or no mark is not ours
        again = subprocess.run(["bash", str(SCRIPT), mark], capture_output=True, text=True, timeout=60)
        assert again.returncode == 0 and again.stdout == ""  # nothing left: says nothing
    finally:
        for proc in ours + others:
            proc.kill()
            proc.wait()


def test_test_sh_marks_each_tier_and_reaps_after_it():
    text = (SCRIPT.parent / "test.sh").read_text()
    assert 'AUTOMEDBENCH_TEST_RUN=$mark timeout' in text
    assert text.index("AUTOMEDBENCH_TEST_RUN=$mark timeout") < text.index('reap-test-leftovers.sh "$mark"')
