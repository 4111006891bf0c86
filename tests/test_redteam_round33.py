"""Red team round 33: hidden answers in the metadata and order of what the stager publishes and the sandbox shows.

- **A track that writes its staging itself** (the engine's fallback, any third-party track): a track's `stage` that
  writes `dest/public` and `dest/private` without `staging_area` is accepted (the engine checks the tree and writes
  the stamp after it), but only a commit relaid the public tree (`stagearea.relay`). Such a track's write order
  stayed in every file's mtime and inode: on a toy layout of 40 cases written label 0 first, an agent answering by
  the input's mtime (then inode) scored accuracy 1.0 through `automedbench evaluate`, against 0.5 for the constant
  baseline. The fallback now relays the tree as a commit does: one mtime, inodes in a secret order; the same agent
  is at chance (0.40-0.65 over 11 stagings, mean 0.53).
- **What the harness's own reads leave in the access time** (every staging, the process evaluator): published files
  carried atime 2000-01-01, earlier than their change time, so under relatime (Linux's default; the data root here
  is ext4, relatime) the first read set it: the staging's digest at once, then the first harness-side read of each
  day. The sandbox binds the staged folder itself, so a run saw when and in which order the harness last read each
  input: after a day, `automedbench evaluate` with its pictures stamped every public file it read, case by case
  (segmentation/demo 5 of 5 inputs, detection/demo 24 of 24, classification/demo 42 of 84), the gaps being the
  evaluator's time per case, which follows the reference. No rating was gained from it (the gaps' rank correlation
  with the labels on those demos: |rho| <= 0.5 with no consistent sign), but the channel is the evaluator's. The
  atime is now a constant after any change time (2038-01-01): relatime and noatime never update it, and reads
  through the sandbox's read-only mounts update none; the sandbox sees one atime and one mtime.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from automedbench import staging
from automedbench.api import StagedData, atomic_write_text
from automedbench.cli import main
from automedbench.runfolder import RunFolder
from automedbench.stagearea import PUBLISHED_ATIME_NS, PUBLISHED_TIME_NS
from automedbench.testing import StepsAgent, evaluate_outputs, load_task, register_agent, register_toy_track, run_task
from automedbench.toy.track import ANSWER, ToyTrack
from click.testing import CliRunner

TOY = "toy/vowels"
CASES = 40


class WritesItself(ToyTrack):
    """The toy track as a third-party one might write it: `dest` written directly, one hidden label after the other
    (answer 0 for the first half written, 1 for the rest), every input the same word."""

    def stage_demo(self, task, dest: Path) -> StagedData:
        ids = [f"case_{i:02d}" for i in range(CASES)]
        labels = {case: i % 2 for i, case in enumerate(ids)}
        for case in sorted(ids, key=labels.__getitem__):
            atomic_write_text(dest / "public" / case / "input.txt", "case\n", shared=True)
            atomic_write_text(dest / "private" / case / ANSWER, f"{labels[case]}\n")
            time.sleep(0.002)  # a stager's work per case: distinct mtimes even on a coarse clock
        return StagedData(dest, dest / "public", dest / "private", ids)


def _answers_by_write_order(public: Path, dest: Path) -> None:
    """An agent that reads no input: the first half of the cases by mtime, then inode, is label 0."""
    def first(case: Path) -> tuple[int, int]:
        info = (case / "input.txt").stat()
        return info.st_mtime_ns, info.st_ino

    cases = sorted((p for p in public.iterdir() if p.is_dir()), key=first)
    for rank, case in enumerate(cases):
        (dest / case.name).mkdir(parents=True)
        (dest / case.name / ANSWER).write_text("0" if rank < len(cases) // 2 else "1")


def test_a_track_writing_its_staging_itself_publishes_no_write_order(tmp_path, monkeypatch):
    """Before: accuracy 1.0 by the inputs' mtimes alone. Now one mtime, and the agent is at chance."""
    register_toy_track()
    track, task = load_task(TOY)
    installed = staging.generator_digest(track)
    # the staging stands for the installed toy task's, so the evaluator takes it as it is
    monkeypatch.setattr(staging, "generator_digest", lambda _track: installed)
    staged = staging.stage(WritesItself(), task, tmp_path / "data")
    assert len(staged.case_ids) == CASES
    entries = [staged.public, *staged.public.rglob("*")]
    assert {os.lstat(p).st_mtime_ns for p in entries} == {PUBLISHED_TIME_NS}
    assert {os.lstat(p).st_nlink for p in entries if p.is_file()} == {1}
    monkeypatch.undo()
    _answers_by_write_order(staged.public, tmp_path / "attack")
    result = evaluate_outputs(TOY, data_root=tmp_path / "data", work=tmp_path / "eval", submission=tmp_path / "attack")
    constant = evaluate_outputs(TOY, data_root=tmp_path / "data", work=tmp_path / "constant", baseline="constant")
    assert constant.task.partial == 0.5
    # chance: a hypergeometric count of the first half's label-0 cases; 0.9 or more is under one in 10^5
    assert result.task.partial < 0.9, result.task.partial


def _published_times(public: Path) -> set[tuple[int, int]]:
    return {(os.lstat(p).st_atime_ns, os.lstat(p).st_mtime_ns) for p in [public, *public.rglob("*")]}


PRINT_TIMES = ("import os\nroot = os.environ['DATA_DIR']\nseen = set()\n"
               "for folder, dirs, files in os.walk(root):\n"
               "    for name in ['.', *dirs, *files]:\n"
               "        info = os.lstat(os.path.join(folder, name))\n"
               "        seen.add((info.st_atime_ns, info.st_mtime_ns))\n"
               "print('TIMES', sorted(seen))\n")


def test_no_read_of_the_harness_changes_a_published_files_access_time(tmp_path):
    """Every published entry's atime is one constant the kernel keeps under relatime (after its change time and
    after now), before and after `automedbench evaluate` has read every input for the cases' pictures."""
    register_toy_track()
    track, task = load_task(TOY)
    staged = staging.stage(track, task, tmp_path / "data")
    now = time.time_ns()
    for path in [staged.public, *staged.public.rglob("*")]:
        info = os.lstat(path)
        assert info.st_atime_ns > max(info.st_ctime_ns, info.st_mtime_ns, now), path
    assert _published_times(staged.public) == {(PUBLISHED_ATIME_NS, PUBLISHED_TIME_NS)}
    out = tmp_path / "evaluated"
    outcome = CliRunner().invoke(main, ["evaluate", "--task", TOY, "--baseline", "perfect", "--data-root",
                                        str(tmp_path / "data"), "--out", str(out)])
    assert outcome.exit_code == 0, outcome.output
    index = json.loads((out / "pictures" / "index.json").read_text())
    words = {case["case_id"]: text["text"] for case in index["cases"] for text in case["texts"]
             if text["title"] == "word"}  # each case's picture shows its input: the evaluator read every one
    assert words == {case: (staged.public / case / "input.txt").read_text().strip() for case in staged.case_ids}
    assert _published_times(staged.public) == {(PUBLISHED_ATIME_NS, PUBLISHED_TIME_NS)}


def test_the_sandbox_shows_one_access_and_one_modification_time(tmp_path):
    """Through the real runner: the agent's listing of /data/public finds one (atime, mtime) pair."""
    register_toy_track()
    register_agent(StepsAgent)
    track, task = load_task(TOY)
    staging.stage(track, task, tmp_path / "data")
    result, run_dir = run_task(TOY, StepsAgent.name, out=tmp_path / "runs", data_root=tmp_path / "data",
                               agent_options={"steps": [["python", PRINT_TIMES]]})
    printed = [e["stdout"] for e in RunFolder(run_dir).events()
               if e.get("type") == "tool" and "TIMES" in str(e.get("stdout", ""))]
    assert printed, result.state
    assert f"TIMES [({PUBLISHED_ATIME_NS}, {PUBLISHED_TIME_NS})]" in printed[0]


def test_a_demo_copied_from_the_shared_staging_keeps_the_published_times(tmp_path):
    """The test kit's shared demos are copied with their times (`copy2`): the copy shows what the staging shows."""
    register_toy_track()
    track, task = load_task(TOY)
    staging.share_demos(tmp_path / "worker", tmp_path / "shared")
    try:
        copied = staging.ensure(track, task, tmp_path / "worker")
    finally:
        staging._demo_shares.pop(Path(os.path.abspath(tmp_path / "worker")), None)
    assert copied.root == tmp_path / "worker" / TOY
    assert _published_times(copied.public) == {(PUBLISHED_ATIME_NS, PUBLISHED_TIME_NS)}
