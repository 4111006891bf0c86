"""The one staging swap every track uses (`automedbench.api.staging_area`): all or nothing, crash-safe, serialised.

Crashes are real: a child process is killed (os._exit) at each rename of the swap, and the next reader
must find either the whole previous staging or the whole new one, never a mix and never a missing part.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import pytest
from automedbench import staging
from automedbench.api import StagedData, StagingArea, TaskSpec, Track, UserError, staging_area
from automedbench.staging import DISCARD, INCOMING, PREVIOUS, lock_path, recover, staging_lock

FORK = multiprocessing.get_context("fork")


def write_version(area: StagingArea, version: str, cases: list[str]) -> None:
    for case in cases:
        (area.public / case).mkdir()
        (area.public / case / "input.txt").write_text(version)
        (area.private / case).mkdir()
        (area.private / case / "answer.txt").write_text(version)


def stage_version(dest: Path, version: str, cases: list[str]) -> StagedData:
    with staging_area(dest, durable=False) as area:
        write_version(area, version, cases)
        return area.commit(cases)


def versions(dest: Path) -> dict[str, set[str]]:
    """Which versions each part's files hold, and which case folders each part has."""
    found: dict[str, set[str]] = {}
    for part in ("public", "private"):
        files = sorted((dest / part).rglob("*.txt")) if (dest / part).is_dir() else []
        found[part] = {f.read_text() for f in files}
        found[part + "_cases"] = {f.parent.name for f in files}
    return found


def leftovers(dest: Path) -> list[str]:
    return [n for n in (INCOMING, PREVIOUS, DISCARD) if os.path.lexists(dest / n)]


def test_commit_replaces_both_parts_and_drops_stale_cases(tmp_path):
    dest = tmp_path / "task"
    first = stage_version(dest, "v1", ["a", "b", "c"])
    assert first.case_ids == ["a", "b", "c"] and first.public == dest / "public"
    stage_version(dest, "v2", ["a", "b"])
    found = versions(dest)
    assert found["public"] == found["private"] == {"v2"}
    assert found["public_cases"] == found["private_cases"] == {"a", "b"}  # c, staged only before, is gone
    assert leftovers(dest) == []


def test_failure_while_writing_keeps_the_previous_staging(tmp_path):
    dest = tmp_path / "task"
    stage_version(dest, "v1", ["a", "b"])
    with pytest.raises(RuntimeError, match="download broke"), staging_area(dest, durable=False) as area:
        write_version(area, "v2", ["a"])
        raise RuntimeError("download broke")
    found = versions(dest)
    assert found["public"] == found["private"] == {"v1"} and found["public_cases"] == {"a", "b"}
    assert leftovers(dest) == []


def test_leaving_without_commit_changes_nothing_and_empty_commit_is_refused(tmp_path):
    dest = tmp_path / "task"
    stage_version(dest, "v1", ["a"])
    with staging_area(dest, durable=False) as area:
        write_version(area, "v2", ["a"])
    assert versions(dest)["public"] == {"v1"}
    with pytest.raises(UserError, match="staging produced no questions"), staging_area(dest) as area:
        area.commit([], "questions")
    assert versions(dest)["public"] == {"v1"} and leftovers(dest) == []


def test_a_failing_swap_rolls_back(tmp_path, monkeypatch):
    """The third rename (the first new part moving in) fails: the previous parts come back."""
    dest = tmp_path / "task"
    stage_version(dest, "v1", ["a"])
    real, calls = os.rename, []

    def flaky(src, dst):
        calls.append(src)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        real(src, dst)

    monkeypatch.setattr(os, "rename", flaky)
    with pytest.raises(OSError, match="No space"):
        stage_version(dest, "v2", ["a"])
    monkeypatch.setattr(os, "rename", real)
    assert versions(dest)["public"] == versions(dest)["private"] == {"v1"}
    assert leftovers(dest) == []


def _crash_at(dest: str, rename_number: int, first: bool) -> None:
    """In a child: stage v2 (or v1 on an empty dest) and die without cleanup at the n-th rename."""
    real, count = os.rename, [0]

    def dying(src, dst):
        count[0] += 1
        if count[0] == rename_number:
            os._exit(9)
        real(src, dst)

    os.rename = dying  # type: ignore[assignment]
    stage_version(Path(dest), "v1" if first else "v2", ["a", "b"])
    os._exit(0)


# renames of a swap over an existing staging: 2 old parts aside, 2 new parts in, .previous -> .discard;
# the journal's own atomic write renames first (1)
@pytest.mark.parametrize("rename_number", [1, 2, 3, 4, 5, 6, 7])
@pytest.mark.parametrize("first", [False, True])
def test_a_crash_at_any_rename_leaves_one_whole_staging(tmp_path, rename_number, first):
    dest = tmp_path / "task"
    if not first:
        stage_version(dest, "v1", ["a", "b", "c"])
    child = FORK.Process(target=_crash_at, args=(str(dest), rename_number, first))
    child.start()
    child.join(30)
    assert child.exitcode in (0, 9)
    with staging_lock(dest):
        recover(dest)
    found = versions(dest)
    assert leftovers(dest) == []
    if first and found["public"] == found["private"] == set():
        assert not (dest / "public").exists() and not (dest / "private").exists()  # nothing staged: nothing half
        return
    assert found["public"] == found["private"] and len(found["public"]) == 1, found
    expected_cases = {"a", "b", "c"} if found["public"] == {"v1"} and not first else {"a", "b"}
    assert found["public_cases"] == found["private_cases"] == expected_cases
    if child.exitcode == 0:
        assert found["public"] == {"v1" if first else "v2"}  # the swap committed: the new staging is in


def _stage_slowly(dest: str, version: str, log: str) -> None:
    with staging_area(Path(dest), durable=False) as area:
        with open(log, "a") as handle:
            handle.write(f"start {version}\n")
        for case in [f"c{i}" for i in range(20)]:
            (area.public / case).mkdir()
            (area.public / case / "input.txt").write_text(version)
            (area.private / case).mkdir()
            (area.private / case / "answer.txt").write_text(version)
            time.sleep(0.005)
        with open(log, "a") as handle:
            handle.write(f"end {version}\n")
        area.commit([f"c{i}" for i in range(20)])


def test_two_processes_staging_the_same_task_take_turns(tmp_path):
    dest, log = tmp_path / "task", tmp_path / "log.txt"
    workers = [FORK.Process(target=_stage_slowly, args=(str(dest), v, str(log))) for v in ("p1", "p2")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert [w.exitcode for w in workers] == [0, 0]
    lines = log.read_text().split()
    # start X, end X, start Y, end Y: the second waited for the first's commit
    assert lines[0::2] == ["start", "end", "start", "end"] and lines[1] == lines[3] != lines[5] == lines[7], lines
    found = versions(dest)
    assert found["public"] == found["private"] and len(found["public"]) == 1
    assert found["public"] == {lines[7]}  # the last committer's staging, whole
    assert lock_path(dest).parent == tmp_path and leftovers(dest) == []


def test_the_lock_is_reentrant_in_one_process(tmp_path):
    dest = tmp_path / "task"
    with staging_lock(dest):
        assert stage_version(dest, "v1", ["a"]).case_ids == ["a"]  # would deadlock on a plain flock


def _stage_in_child(dest: str) -> None:
    stage_version(Path(dest), "child", ["a"])
    os._exit(0)


def test_a_child_forked_under_the_lock_waits_for_the_parent(tmp_path):
    """The child must not inherit the parent's re-entrant hold: it waits until the parent lets go."""
    dest = tmp_path / "task"
    with staging_lock(dest):
        child = FORK.Process(target=_stage_in_child, args=(str(dest),))
        child.start()
        child.join(1.0)
        assert child.exitcode is None  # still waiting for the lock
        stage_version(dest, "parent", ["a"])
    child.join(30)
    assert child.exitcode == 0 and versions(dest)["public"] == {"child"}


class CountingTrack(Track):
    """A demo track that records each staging it makes, slowly, so two processes overlap."""

    name = "counting"

    def __init__(self, log: Path) -> None:
        self.log = log

    def tasks(self) -> list[TaskSpec]:
        return []

    def stage(self, task: TaskSpec, dest: Path, source: Path | None) -> StagedData:
        with staging_area(dest, durable=False) as area:
            time.sleep(0.3)
            write_version(area, str(task.params["seed"]), ["a"])
            with open(self.log, "a") as handle:
                handle.write(f"{os.getpid()}\n")
            return area.commit(["a"])

    def template_dir(self) -> Path:
        return Path(".")

    def check_case(self, task, case_id, submitted, public):
        raise NotImplementedError


def _ensure(data_root: str, log: str) -> None:
    staging.ensure(CountingTrack(Path(log)), _task(), Path(data_root))


def _task(demo: bool = True) -> TaskSpec:
    """A one-case task of the counting track: a generated demo, or (demo=False) a task staged from a folder (a
    demo ignores a folder given to it, so re-staging from another source needs a real task)."""
    import attrs
    from automedbench import toy
    from automedbench.taskfile import load_task_dir

    (vowels,) = load_task_dir(Path(toy.__file__).parent / "tasks")
    return attrs.evolve(vowels, id="counting/demo" if demo else "counting/sourced", track="counting", case_count=1,
                        demo=demo)


def test_two_runs_of_a_demo_stage_it_once(tmp_path):
    """Two processes starting the same demo at once: the second finds the first's staging (its seed is
    secret and per staging, so restaging would swap the data under the first run)."""
    log = tmp_path / "stagings.txt"
    data_root = tmp_path / "data"
    data_root.mkdir()
    workers = [FORK.Process(target=_ensure, args=(str(data_root), str(log))) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert [w.exitcode for w in workers] == [0, 0]
    assert len(log.read_text().split()) == 1


class SourceTrack(Track):
    """A track that stages the version written in its source file, through the staging area."""

    name = "counting"

    def tasks(self) -> list[TaskSpec]:
        return []

    def stage(self, task: TaskSpec, dest: Path, source: Path | None) -> StagedData:
        with staging_area(dest, durable=False) as area:
            write_version(area, source.read_text() if source else "v1", ["a", "b"])
            return area.commit(["a", "b"])

    def template_dir(self) -> Path:
        return Path(".")

    def check_case(self, task, case_id, submitted, public):
        raise NotImplementedError


def _restage_and_die(data_root: str, source: str, crash: str) -> None:
    """In a child: re-stage through the engine and die without cleanup at `crash`: "commit" (the swap
    done, back in the track, before the engine goes on) or "move-N" (the n-th rename of the re-staging)."""
    import automedbench.stagearea as stagearea

    if crash == "commit":
        real_commit = stagearea.StagingArea.commit

        def commit_and_die(self, case_ids, what="cases"):
            real_commit(self, case_ids, what)
            os._exit(9)

        stagearea.StagingArea.commit = commit_and_die  # type: ignore[method-assign]
    else:
        count, number = [0], int(crash.split("-")[1])
        real_rename, real_replace = os.rename, os.replace

        def dying(real):
            def move(src, dst, **kwargs):
                count[0] += 1
                if count[0] == number:
                    os._exit(9)
                real(src, dst, **kwargs)
            return move

        os.rename, os.replace = dying(real_rename), dying(real_replace)  # type: ignore[assignment]
    staging.stage(SourceTrack(), _task(demo=False), Path(data_root), Path(source))
    os._exit(0)


@pytest.mark.parametrize("crash", ["commit", *(f"move-{n}" for n in range(1, 12))])
def test_a_crash_during_a_restaging_never_leaves_new_data_under_the_old_stamp(tmp_path, crash):
    """The digests a run records come from the stamp (`load` does not re-hash): after a stager is killed
    anywhere in a re-staging, past the swap too, the stamp must describe the data that is there."""
    from automedbench.fsutil import tree_digest

    data_root, task = tmp_path / "data", _task(demo=False)
    data_root.mkdir()
    for version in ("v1", "v2"):
        (tmp_path / version).write_text(version)
    staging.stage(SourceTrack(), task, data_root, tmp_path / "v1")
    child = FORK.Process(target=_restage_and_die, args=(str(data_root), str(tmp_path / "v2"), crash))
    child.start()
    child.join(60)
    assert child.exitcode in (0, 9)
    if crash == "commit":
        assert child.exitcode == 9  # killed at the point under test, not before it
    staged = staging.load(task, data_root)
    found = versions(staged.root)
    assert found["public"] == found["private"] and len(found["public"]) == 1, found
    assert staging.digests(task, data_root) == {"public_data": tree_digest(staged.public),
                                               "private_data": tree_digest(staged.private)}
    assert [n for n in leftovers(staged.root) if n != INCOMING] == []  # a killed stager's scratch may stay
    if child.exitcode == 0 or crash == "commit":
        assert found["public"] == {"v2"}  # the swap committed: the new data, under its own stamp
