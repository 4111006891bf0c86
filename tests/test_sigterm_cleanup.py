"""SIGTERM on a real `automedbench run` (and a sweep) mid-agent-phase: the process unwinds as on Ctrl-C, so
its loop-mounted workspace is unmounted, its loop device detached, its folder removable, and the run is
recorded as cancelled (never scored, never the agent's failure)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from automedbench.sandboxes.quota import unsupported
from automedbench.trajectory import read_events
from automedbench_campaign.sweep import MANIFEST

# The CLI with one extra agent: a single call that sleeps (a marked duration, to find its process), never submits.
CLI_WITH_SLEEPER = """
import sys
from automedbench import testing
from automedbench.testing import StepsAgent

MARK = sys.argv.pop()  # the last argument is the sleep's marked duration, not the CLI's

class Sleeper(StepsAgent):
    name = "sleeper"

    def __init__(self) -> None:
        super().__init__([["bash", "sleep " + MARK]])

testing.register_agent(Sleeper)
from automedbench.cli import main
main()
"""
CLI = [sys.executable, "-c", "from automedbench.cli import main; main()"]
EXIT_BOUND_S = 60  # the unwind itself takes about a second; generous for a loaded machine


def test_the_first_signal_raises_repeats_are_ignored_and_the_handlers_come_back():
    import threading

    from automedbench import interrupt

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are delivered to the main thread only")
    before = {s: signal.getsignal(s) for s in interrupt.SIGNALS}
    with pytest.raises(interrupt.Terminated) as caught, interrupt.terminate_as_interrupt():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(10)
            pytest.fail("SIGTERM did not interrupt")
        finally:  # the unwind: a second signal (SIGHUP too) must not cut it short
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(0.05)
            assert interrupt.received() == signal.SIGTERM and interrupt.exit_status() == 143
            assert "SIGTERM" in interrupt.reason()
    assert caught.value.signum == signal.SIGTERM and isinstance(caught.value, KeyboardInterrupt)
    assert {s: signal.getsignal(s) for s in interrupt.SIGNALS} == before
    with interrupt.terminate_as_interrupt():  # a new command in the same process starts with no signal seen
        assert interrupt.received() is None and interrupt.exit_status() == 130
        assert interrupt.reason() == "cancelled by the user"
    # outside the main thread nothing is installed (Python could not deliver there anyway)
    seen = []
    worker = threading.Thread(target=lambda: seen.append(
        (interrupt.terminate_as_interrupt().__enter__(), signal.getsignal(signal.SIGTERM))))
    worker.start()
    worker.join()
    assert seen == [(None, before[signal.SIGTERM])]


def need_loop_mounts() -> None:
    why = unsupported()
    if why:
        pytest.skip(f"no loop-mounted workspace here: {why}")


def start_sleeper(out: Path, data_root: Path) -> tuple[str, subprocess.Popen, Path]:
    """`automedbench run` of the sleeper with a 64 MB workspace quota, in its own session, once its workspace is
    mounted and its call sleeps: (the sleep's mark, the process, the workspace)."""
    mark = f"{600 + os.getpid() % 1000}.{time.time_ns() % 10**6:06d}"  # a sleep no other test runs
    scratch = out.with_name(out.name + "-tmp")  # a run killed here leaves its call folder there, not in /tmp
    scratch.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-c", CLI_WITH_SLEEPER, "run", "--task", "segmentation/demo", "--agent",
                             "sleeper", "--out", str(out), "--data-root", str(data_root), "--workspace-quota-mb",
                             "64", mark], start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ, "TMPDIR": str(scratch)})
    try:
        workspace = Path(wait_until(lambda: under(mount_points(), out), proc, "the workspace mount")[0])
        wait_until(lambda: sandbox_sleepers(mark), proc, "the agent's call to start")
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    return mark, proc, workspace


def terminate(proc: subprocess.Popen) -> tuple[str, float]:
    """SIGTERM to the process alone; (its output, seconds until it exited). Killed with its group if it hangs."""
    t0 = time.monotonic()
    try:
        os.kill(proc.pid, signal.SIGTERM)
        output, _ = proc.communicate(timeout=EXIT_BOUND_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return output, time.monotonic() - t0


def mount_points() -> set[str]:
    """Every mount point this process sees (octal escapes of /proc/self/mountinfo decoded)."""
    points = set()
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        raw = line.split(" ")[4]
        points.add(raw.encode().decode("unicode_escape"))
    return points


def loop_backing_files() -> list[str]:
    found = []
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        try:
            found.append(backing.read_text().strip())
        except OSError:  # detached between the listing and the read
            continue
    return found


def loops_backed_under(folder: Path, settle_s: float = 10.0) -> list[str]:
    """Loop devices still backed by a file under `folder`, once the kernel has had `settle_s` to detach them (an
    unmounted loop device is cleared asynchronously)."""
    deadline = time.monotonic() + settle_s
    while under(loop_backing_files(), folder) and time.monotonic() < deadline:
        time.sleep(0.05)
    return under(loop_backing_files(), folder)


def under(paths, folder: Path) -> list[str]:
    return [p for p in paths if p == str(folder) or p.startswith(str(folder) + "/")]


def wait_until(check, proc: subprocess.Popen, what: str, timeout: float = 120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        if proc.poll() is not None:
            raise AssertionError(f"exited ({proc.returncode}) before {what}: {proc.communicate()[0]}")
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def sandbox_sleepers(mark: str) -> list[int]:
    """Processes running the sleeper's marked `sleep`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv[:2] == [b"sleep", mark.encode()]:
                found.append(int(entry.name))
    return found


def test_sigterm_on_a_run_unmounts_its_workspace_and_records_it_cancelled(tmp_path, data_root, staged):
    need_loop_mounts()
    out = tmp_path / "runs"
    mark, proc, workspace = start_sleeper(out, data_root)
    run_dir = workspace.parent
    output, took = terminate(proc)  # the CLI process alone, as a service manager or `kill` would
    assert proc.returncode == 128 + signal.SIGTERM, output
    assert took < EXIT_BOUND_S
    assert under(mount_points(), out) == []  # nothing of the run stays mounted
    assert loops_backed_under(run_dir) == []  # and its image holds no loop device
    assert sandbox_sleepers(mark) == []  # the agent's call ended with the run
    result = json.loads((run_dir / "result.json").read_text())
    assert (result["state"], result["end_reason"]) == ("cancelled", "cancelled"), result
    assert "SIGTERM" in result["error"]
    last = read_events(run_dir / "trajectory.jsonl")[-1]
    assert (last["type"], last["reason"]) == ("end", "cancelled")
    shutil.rmtree(out)  # "Device or resource busy" before: the mount outlived the process
    assert not out.exists()


@pytest.mark.parametrize("executor", ["local", "inline"])
def test_sigterm_on_a_sweep_stops_its_runs_and_unmounts_their_workspaces(tmp_path, data_root, staged, executor):
    """local: the run is in a pool worker the signal never reached; inline: in the sweep's own process, which
    must start no further run once the interrupted one is recorded."""
    need_loop_mounts()
    out = tmp_path / "sweep"
    # a grace time far above the bound below: a sweep that left its worker to the grace time cannot pass
    env = {**os.environ, "AUTOMEDBENCH_DATA": str(data_root), "AUTOMEDBENCH_CANCEL_GRACE_S": str(3 * EXIT_BOUND_S)}
    proc = subprocess.Popen([*CLI, "sweep", "--agents", "reference", "--tasks", "segmentation/demo", "--repeats", "2",
                             "--workers", "1", "--executor", executor, "--workspace-quota-mb", "64", "--out", str(out),
                             "--data-root", str(data_root)], start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)
    try:
        wait_until(lambda: under(mount_points(), out), proc, "a run's workspace mount")
        wait_until(lambda: [p for p in out.glob("reference.*/trajectory.jsonl") if '"type": "tool"' in p.read_text()],
                   proc, "the agent phase")
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    output, took = terminate(proc)  # the sweep alone: it must pass the signal on to a worker itself
    assert proc.returncode == 128 + signal.SIGTERM, output
    assert "interrupted: rerun the same command to resume" in output
    # at once, not after the pool's grace time for a worker that was never told (set to 3 × the bound above)
    assert took < EXIT_BOUND_S, took
    assert under(mount_points(), out) == [] and loops_backed_under(out) == []
    runs = json.loads((out / MANIFEST).read_text())["runs"]
    states = {}
    for run_id, record in runs.items():
        folder = out / run_id
        if folder.exists():  # the manifest and the folder agree; the run in flight ended cancelled (or scored)
            states[run_id] = json.loads((folder / "result.json").read_text())["state"]
            assert record["state"] == states[run_id], (run_id, record)
        else:
            assert (record["state"], record["attempts"]) == ("pending", 0), run_id
    assert len(states) == 1 and set(states.values()) <= {"cancelled", "scored"}, states
    shutil.rmtree(out)


def test_a_killed_runs_mount_is_reaped_and_a_live_ones_never(tmp_path, data_root, staged):
    """SIGKILL cannot be caught: the next run in the same folder unmounts what the dead one left, and only that."""
    from automedbench.sandboxes.quota import mount_workspace, reap_stale_workspaces

    need_loop_mounts()
    out = tmp_path / "runs"
    mark, proc, workspace = start_sleeper(out, data_root)
    try:
        assert reap_stale_workspaces(out) == []  # its owner is alive: left alone
        assert str(workspace) in mount_points()
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=EXIT_BOUND_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while sandbox_sleepers(mark) and time.monotonic() < deadline:  # the sandbox dies with its parent
        time.sleep(0.1)
    assert str(workspace) in mount_points()  # what SIGKILL leaves behind
    # the next run's workspace in the same folder: mounting it unmounts the dead run's first
    (out / "next").mkdir()
    quota, why = mount_workspace(out / "next" / "workspace", 16)
    assert quota is not None, why
    assert str(workspace) not in mount_points() and str(out / "next" / "workspace") in mount_points()
    quota.release()
    assert under(mount_points(), out) == [] and loops_backed_under(out) == []
    assert not (workspace.parent / "workspace.lock").exists()
    assert reap_stale_workspaces(out) == []  # nothing left: a second pass finds nothing
    shutil.rmtree(out)
