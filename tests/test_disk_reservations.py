"""Disk promised to concurrent runs: the reservation ledger, refusal with one line, and who a full disk is charged to.

Two runs starting together were each promised 90 % of the same free disk; the neighbour filling its share
then made the honest run's record fail, and that failure was charged to the honest agent. These tests run
the real runner where a run is involved, on a small tmpfs as the run folder's disk (root only).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
from pathlib import Path

import attrs
import pytest
from automedbench.agent import Agent
from automedbench.errors import UserError
from automedbench.records import AgentTurn, ToolCall
from automedbench.runner import Run, RunOptions
from automedbench.sandboxes import quota
from automedbench.sandboxes.local import bwrap_path
from automedbench.sandboxes.reservations import LEDGER_ENV, Ledger, Reservation, _start_time, ledger_dir
from review_steps import DEMO, register_agent


@pytest.fixture
def ledger(tmp_path, monkeypatch) -> Ledger:
    """A private ledger (the machine's would hold this test's promises against every other run on the host)."""
    monkeypatch.setenv(LEDGER_ENV, str(tmp_path / "ledger"))
    return Ledger()


def _tmpfs(tmp_path, size: str):
    if os.geteuid() != 0 or quota.unsupported():
        pytest.skip(f"needs root and loop devices ({quota.unsupported()})")
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(disk)]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    return disk


@pytest.fixture
def small_disk(tmp_path):
    """A 512 MB tmpfs: the disk the run folders live on (a small workspace and what is promised with it)."""
    disk = _tmpfs(tmp_path, "512m")
    yield disk
    subprocess.run(["umount", "-l", str(disk)])


@pytest.fixture
def demo_disk(tmp_path):
    """A 3.5 GB tmpfs (memory only for what is written: the images are sparse): room for a demo's 1 GB workspace and
    the copies promised with it (the freeze, up to 1 GB, the pilots', 512 MB, and the records the agent can make
    the harness write, 261 MB: `quota.copies_of`)."""
    disk = _tmpfs(tmp_path, "3584m")
    yield disk
    subprocess.run(["umount", "-l", str(disk)])


def _reserve_in_child(args) -> int:
    state, folder, index = args
    os.environ[LEDGER_ENV] = state
    entry, _, _ = Ledger().reserve(Path(folder), Path(folder) / f"img{index}", 1 << 40, 0.9, 1 << 20)
    # the child exits holding its promise: the parent reads the ledger while the children are alive
    return entry.size_bytes if entry else 0


def test_concurrent_promises_never_exceed_the_free_disk(tmp_path, ledger):
    """Eight processes asking at once for far more than the disk holds are promised, together, at most what is free."""
    import shutil

    free = shutil.disk_usage(tmp_path).free
    with multiprocessing.get_context("fork").Pool(8) as pool:
        sizes = pool.map(_reserve_in_child, [(str(ledger.folder), str(tmp_path), i) for i in range(8)])
    # each asker is promised 0.9 of what is free and not yet promised, so together they get all but 0.1^8 of
    # it: other processes on a shared disk (a parallel test worker) free or fill a few MB meanwhile, hence the
    # 1 % slack; promising one free byte twice would give at least 1.8x what is free
    free = max(free, shutil.disk_usage(tmp_path).free)
    assert sum(sizes) <= 1.01 * free, (sizes, free)
    assert sizes.count(0) < 8  # the first asker is promised something


def test_an_ended_process_promise_is_dropped(tmp_path, ledger):
    entry, _, _ = ledger.reserve(tmp_path, tmp_path / "img", 1 << 20, 0.9, 1)
    assert entry is not None and [e.id for e in ledger.entries()] == [entry.id]
    dead = subprocess.Popen(["true"])
    dead.wait()
    ghost = Reservation("ghost", os.stat(tmp_path).st_dev, str(tmp_path / "g"), 1 << 30, dead.pid, "1")
    rows = [*json.loads(ledger.path.read_text()), attrs.asdict(ghost)]
    ledger.path.write_text(json.dumps(rows))
    assert [e.id for e in ledger.entries()] == [entry.id]  # a crashed run's promise does not outlive it
    ledger.release(entry.id)
    assert ledger.entries() == []
    assert _start_time(os.getpid()) != ""


def test_a_run_that_cannot_be_reserved_is_refused_with_one_line(reg, data_root, small_disk, ledger):
    """Another live run holds almost all the disk: the new run is refused (exit 2), its folder never made."""
    import shutil

    free = shutil.disk_usage(small_disk).free
    held, _, _ = ledger.reserve(small_disk, small_disk / "neighbour.img", free - (4 << 20), 1.0, 1)
    assert held is not None
    register_agent(reg, Fill)
    runner = Run(RunOptions(DEMO, "lite", Fill.name, out=small_disk, data_root=data_root), reg)
    with pytest.raises(UserError) as refused:
        runner.execute()
    message = str(refused.value)
    assert "cannot reserve disk for the workspace" in message and "promised to other running runs" in message
    assert "1024 MB asked" in message and "--workspace-quota-mb" in message and "MB free" in message
    assert "\n" not in message
    assert not runner.run_dir.exists()
    ledger.release(held.id)


class Fill(Agent):
    """Turn 1: a call; turn 2: (outside the sandbox, as a neighbouring run would) the host disk is filled;
    turn 3: a call whose output the harness must record on the now-full disk."""

    name = "neighbour-fills-disk"

    def __init__(self, disk: str = "") -> None:
        self.disk = Path(disk) if disk else None
        self.turn = 0

    def next_turn(self, messages):
        self.turn += 1
        if self.turn == 2 and self.disk is not None:
            with open(self.disk / "neighbour.bin", "wb") as fh, __import__("contextlib").suppress(OSError):
                while True:
                    fh.write(b"\1" * (1 << 20))
        if self.turn <= 3:
            code = "echo " + "x" * 20000
            return AgentTurn(f"step {self.turn}", [ToolCall(f"c{self.turn}", "execute_code",
                                                            json.dumps({"language": "bash", "code": code}))])
        return AgentTurn("submit", [ToolCall("s", "submit_results", "{}")])


def test_a_neighbour_filling_the_disk_is_not_the_agents_failure(reg, data_root, small_disk, ledger):
    """The agent is confined to its reserved image; a host process fills the rest: infrastructure, not H-DISK."""
    if bwrap_path() is None:
        pytest.skip("needs bubblewrap (with plain processes the agent itself could have filled the disk)")
    register_agent(reg, Fill)
    runner = Run(RunOptions(DEMO, "lite", Fill.name, out=small_disk, data_root=data_root, workspace_quota_mb=32,
                            agent_options={"disk": str(small_disk)}), reg)
    result = runner.execute()
    (small_disk / "neighbour.bin").unlink(missing_ok=True)
    assert result.state == "infrastructure_failure", (result.state, result.error)
    assert "another process on the host filled the disk" in (result.error or "")
    assert "H-DISK" not in [c.code for c in result.error_codes]
    assert ledger.entries() == []  # the run's promise ended with it


class FillBeforeTheFreeze(Agent):
    """Turn 1: a correct answer for every case; turn 2: (outside the sandbox, as a neighbouring process would)
    the host disk filled up to `leave_mb` MB; turn 3: submit. The harness then freezes the outputs on that disk."""

    name = "neighbour-fills-before-freeze"

    def __init__(self, disk: str = "", leave_mb: str = "0") -> None:
        self.disk = Path(disk)
        self.leave = int(leave_mb) << 20
        self.turn = 0

    def next_turn(self, messages):
        import shutil

        from test_agent_bytes_runs import SOLVE

        self.turn += 1
        if self.turn == 1:
            return AgentTurn("solve", [ToolCall("c1", "execute_code", json.dumps({"language": "python",
                                                                                   "code": SOLVE}))])
        if self.turn == 2:
            with open(self.disk / "neighbour.bin", "wb") as fh, __import__("contextlib").suppress(OSError):
                while shutil.disk_usage(self.disk).free > self.leave + (1 << 20):
                    fh.write(b"\1" * (1 << 20))
                    fh.flush()
        return AgentTurn("submit", [ToolCall("s", "submit_results", "{}")])


def test_a_neighbour_filling_the_disk_before_the_freeze_is_not_the_agents_e5(reg, data_root, small_disk, ledger,
                                                                              tmp_path):
    """An honest run (every case right) on each backend that keeps its agent's writes on the reserved image; a
    neighbour fills the disk before the freeze. Before: the freeze kept 256 MB free for the records and left
    the outputs out ("the disk is (nearly) full"): Task 0 and E5 (submitted with cases missing), charged to the
    agent; filled to the last byte, local-plain's run was the agent's H-DISK. Now the run's promise holds its
    copies, so with a few MB left its few outputs are frozen and scored; with none left the run is an
    infrastructure failure (another process filled the disk; sweeps retry it), never the agent's E5 or H-DISK."""
    from automedbench.testing import register_toy_track

    register_toy_track()
    register_agent(reg, FillBeforeTheFreeze)
    backends = (["local"] if bwrap_path() is not None else []) + ["local-plain"]
    for sandbox in backends:
        for leave in (4, 0):
            runner = Run(RunOptions("toy/vowels", "lite", FillBeforeTheFreeze.name, out=small_disk, sandbox=sandbox,
                                    data_root=tmp_path / "data", workspace_quota_mb=16,
                                    agent_options={"disk": str(small_disk), "leave_mb": str(leave)}), reg)
            result = runner.execute()
            (small_disk / "neighbour.bin").unlink(missing_ok=True)
            codes = [c.code for c in result.error_codes]
            assert "E5" not in codes and "H-DISK" not in codes, (sandbox, leave, result.state, result.error, codes)
            if result.state == "scored":
                assert result.task.strict == 1.0 and not [c for c in result.cases if not c.valid], (sandbox, leave)
            else:
                assert result.state == "infrastructure_failure", (sandbox, leave, result.state, result.error)
                assert "another process on the host filled the disk" in (result.error or "")
            assert leave == 0 or result.state == "scored", (sandbox, leave, result.state, result.error)
            assert ledger.entries() == []


def test_a_promise_covers_the_runs_copies(tmp_path, ledger):
    """The freeze and the pilots copy the image's files onto the same disk: the promise holds room for them
    beside the image, and the next run is promised only what is left of both."""
    import shutil

    budget = int(shutil.disk_usage(tmp_path).free * 0.5)
    first, _, _ = ledger.reserve(tmp_path, tmp_path / "a.img", 1 << 50, 0.5, 1, quota.copies_of)
    assert first is not None and first.extra_bytes == quota.copies_of(first.size_bytes) > 0
    assert first.size_bytes + first.extra_bytes <= budget
    assert first.outstanding() >= first.extra_bytes  # held until the run ends, however little the image took
    second, free, others = ledger.reserve(tmp_path, tmp_path / "b.img", 1 << 50, 1.0, 1, quota.copies_of)
    assert others >= first.size_bytes + first.extra_bytes - (1 << 20)
    assert second is None or second.size_bytes + second.extra_bytes <= free - others + (1 << 20)


def test_a_refusal_names_the_free_space_what_was_asked_and_the_option_through_the_command_line(
        reg, data_root, small_disk, ledger, monkeypatch):
    """`automedbench run` asking more than the disk can promise: exit 2, one line on stderr with the free space,
    the size asked, the most that can be promised now and the option that changes it; no run folder. Then the
    size it names is granted: the option is the way out the message says."""
    import re
    import shutil

    from automedbench.cli import main
    from click.testing import CliRunner

    free_mb = shutil.disk_usage(small_disk).free >> 20
    base = ["run", "--task", DEMO, "--agent", "noop", "--quiet", "--data-root", str(data_root), "--out",
            str(small_disk)]
    refused = CliRunner().invoke(main, [*base, "--workspace-quota-mb", str(4 * free_mb)])
    assert refused.exit_code == 2
    line = refused.output.strip()
    assert "\n" not in line and f"{4 * free_mb} MB asked" in line and "--workspace-quota-mb" in line
    said_free = int(re.search(r"(\d+) MB free where the runs folder is", line)[1])
    assert free_mb - 16 <= said_free <= free_mb  # the run's own result reserve (8 MB) was taken first
    possible = int(re.search(r"at most (\d+) MB can be promised now; pass --workspace-quota-mb (\d+)", line)[1])
    assert 16 <= possible <= said_free and list(small_disk.iterdir()) == []
    granted = CliRunner().invoke(main, [*base, "--workspace-quota-mb", str(possible)])
    assert granted.exit_code == 0, granted.output
    result = json.loads(next(small_disk.glob("*/result.json")).read_text())
    assert f"workspace quota {possible} MB" in " ".join(result["isolation"]["protections"])
    assert ledger.entries() == []


def test_a_run_reserves_its_tasks_declared_need_unless_told_otherwise(reg, data_root, demo_disk, ledger):
    """The default quota is the task's `workspace_mb` (the demos declare 1 GB, not the 32 GB a real task's weights
    take), reserved whole; `--workspace-quota-mb` replaces it."""
    from automedbench.plugins import registry

    task = registry().task(DEMO)[1]
    assert 16 <= task.workspace_mb <= 2048
    for asked, expected in ((None, task.workspace_mb), (40, 40)):
        runner = Run(RunOptions(DEMO, "lite", "noop", out=demo_disk, data_root=data_root,
                                workspace_quota_mb=asked), reg)
        result = runner.execute()
        assert result.state == "scored", result.error
        assert f"workspace quota {expected} MB" in " ".join(result.isolation.protections)


def test_promises_are_all_or_nothing(tmp_path, ledger):
    """A workspace smaller than asked is never promised instead (the agent would run out of the disk its task
    said it needs halfway): the ledger grants the whole request or nothing."""
    import shutil

    free = shutil.disk_usage(tmp_path).free
    assert ledger.reserve(tmp_path, tmp_path / "a", 2 * free, 0.9, 2 * free)[0] is None
    entry, _, _ = ledger.reserve(tmp_path, tmp_path / "b", 1 << 20, 0.9, 1 << 20)
    assert entry is not None and entry.size_bytes == 1 << 20
    ledger.release(entry.id)


def test_the_ledger_is_the_machines_not_the_state_folders(tmp_path, monkeypatch):
    """Runs with different state folders (two checkouts, two harness installs) on one machine see each other's
    promises: the ledger does not follow AUTOMEDBENCH_STATE."""
    monkeypatch.delenv(LEDGER_ENV, raising=False)
    folders = set()
    for state in ("a", "b"):
        monkeypatch.setenv("AUTOMEDBENCH_STATE", str(tmp_path / state))
        folders.add(ledger_dir())
    assert len(folders) == 1
    if os.geteuid() == 0:
        assert folders == {Path("/run/automedbench")}
    monkeypatch.setenv(LEDGER_ENV, str(tmp_path / "mine"))
    assert Ledger().folder == tmp_path / "mine"


@pytest.mark.parametrize("value, ok", [(1024, True), (16, True), (15, False), (0, False), (1 << 25, False),
                                       ("big", False)])
def test_a_task_files_workspace_need_is_validated(value, ok):
    from automedbench.taskfile import parse_task
    from automedbench.testing import register_toy_track
    from automedbench.yamlfile import read_yaml

    register_toy_track()
    from automedbench.plugins import registry

    track = registry().track("toy")
    data = read_yaml(track.root / "tasks" / "vowels.yaml", "task file")
    data["workspace_mb"] = value
    if ok:
        assert parse_task(data, "t.yaml").workspace_mb == value
    else:
        with pytest.raises(UserError) as bad:
            parse_task(data, "t.yaml")
        assert "workspace_mb" in str(bad.value) and "\n" not in str(bad.value)
    data.pop("workspace_mb")
    assert parse_task(data, "t.yaml").workspace_mb == 32768  # a task that declares none: room for weights
