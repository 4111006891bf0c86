"""Two processes re-staging the same task at once, through each track's real stager (no engine lock around
it): both finish, and what is left is one whole staging — the same cases in public/ and private/, no scratch."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import attrs
import pytest
from automedbench.plugins import registry

FORK = multiprocessing.get_context("fork")
# the demos that stage in a second or two; each shares its swap with the track's real stagers
TASKS = ["detection/demo", "classification/demo", "vqa/demo", "report_gen/demo", "segmentation/demo"]
# fewer cases where the demo's stager takes any count (the race is in the swap, not in how much is written):
# detection's 12 smears took 8 s a test under load, 3 take a quarter of it
CASES = {"detection/demo": 3, "segmentation/demo": 2}


def _stage(task_id: str, dest: str, seed: int) -> None:
    track, task = registry().task(task_id)
    task = attrs.evolve(task, params={**task.params, "seed": seed}, case_count=CASES.get(task_id, task.case_count))
    track.stage(task, Path(dest), None)


def _cases(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir() if p.is_dir()}


@pytest.mark.parametrize("task_id", TASKS)
def test_concurrent_restaging_leaves_one_whole_staging(tmp_path, task_id):
    if task_id not in registry().tasks():
        pytest.skip(f"{task_id} is not installed")
    dest = tmp_path / "task"
    _stage(task_id, str(dest), 1)
    workers = [FORK.Process(target=_stage, args=(task_id, str(dest), seed)) for seed in (2, 3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(300)
    assert [w.exitcode for w in workers] == [0, 0]
    assert _cases(dest / "public") == _cases(dest / "private") != set()
    assert sorted(p.name for p in dest.iterdir() if p.name.startswith(".")) == [], os.listdir(dest)
