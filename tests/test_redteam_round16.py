"""Round sixteen of the red team: results anyone can put on a leaderboard, hidden answers public information
decides, state shared across trust levels; through the real runner.

- **Runs of another harness version or task definition pooled into a row** (leaderboards, class 2): round 13 keyed
  a row by `header.hashes.conditions`, the score-changing options, but a run's result also depends on the code
  that scored it and the task it was given. Every genuine result stays countable however old (the proof key
  outlives upgrades), so a runs folder that grew across an upgrade pooled runs scored by the old scorer (one a
  later red-team round found exploitable: round 14's colour-mode staging gave accuracy 1.0) with runs scored by
  the fixed one, and runs made on an older task definition (other thresholds, cases, brief) with the current
  ones: one row, one mean. On toy/vowels, three runs of one agent (the current harness, a run recorded by
  harness 0.0.9, a run on the task with its rating thresholds changed) were one row of three. A result now also
  carries the digest of the task definition, the harness's and track's versions (not Python's or
  the platform's) and the digest of the track's pinned weights, hashed as `header.hashes.scoring`: one task's
  runs that differ in it are rows apart (runs of different tasks in a `--by agent` row differ in it by nature and
  stay pooled).
- **A class told apart by its image size** (classification, class 1): round 14 published every case of a staging
  in one colour mode, but each image kept its own size. Kermany's normal radiographs are larger than its
  pneumonia ones, and the Brain Tumor MRI Dataset's no-tumour slices come from another source than its 512x512
  tumour slices: on a chest-xray-pneumonia layout whose two class folders differ in size, an agent reading only
  the JPEG headers (PIL's `size`) scored accuracy 1.0, rating A, through the real runner. Every case of a
  staging is now published at one size (the drawn images' median height and width, others resampled with
  Lanczos); a download whose images share one size (HAM10000, NCT-CRC-HE, PCam) is published as before. The
  attacker is at chance (0.5). Residual, measured: resampling leaves a trace of the source's size in pixel
  statistics (a Laplacian-variance threshold told 10 upsampled from 10 downsampled synthetic textures of the same
  pixel scale apart); that needs image analysis, as any acquisition shortcut does, not the header.

Held (through the real runner or code read; no test kept): a daemon left by a bwrap call (no process sweep since
e04d0b7) died with the call's PID namespace (setsid'd `sleep; echo` never wrote); the relay's PID-namespace check
(an IPv6-mapped or other-namespace client finds no socket inode in the relay's /proc, refused); `PackagedTrack.task`
with `..`, `.hidden` or `a/b` names falls back to the full listing and a file declaring another id is not taken;
the classification, detection and VQA demos' public headers (one size and mode per staging, every class); the
synthesis reference cache's voxel sample is only a fast reject before a full sha256; a grading-cache line is keyed
by the whole prompt (a plain run's cached reply is what the grader says to that exact text). The plain run's
environment snapshot `skip=` only narrows what marks a plain run (unverified anyway) as changed.
"""

from __future__ import annotations

import attrs
from automedbench.testing import run_steps
from test_redteam_round13 import HALF  # answers three of the six words right


def test_runs_of_another_harness_version_or_task_definition_are_never_pooled(data_root, tmp_path, monkeypatch):
    """Before: one row (StepsAgent, toy/vowels, lite) of three runs: the current harness's, one recorded by
    harness 0.0.9 and one on the task with other rating thresholds. Now three rows, one per condition; runs of
    the same harness and task definition still share one."""
    from automedbench import plugins, provenance
    from automedbench_campaign.leaderboard import build, flat_rows
    from automedbench_campaign.store import load_table

    runs = tmp_path / "runs"
    current, _ = run_steps("toy/vowels", [("python", HALF)], out=runs, data_root=data_root, warm_evaluator=False)
    with monkeypatch.context() as patch:  # a run recorded by an older harness (its scorer may have differed)
        patch.setattr(provenance, "__version__", "0.0.9")
        older, _ = run_steps("toy/vowels", [("python", HALF)], out=runs, data_root=data_root, warm_evaluator=False)
    lookup = plugins.Registry.task

    def redefined(self, task_id):  # the same task id on an earlier definition: another rating threshold
        track, spec = lookup(self, task_id)
        return track, attrs.evolve(spec, rating=attrs.evolve(spec.rating, okay=0.4))

    with monkeypatch.context() as patch:
        patch.setattr(plugins.Registry, "task", redefined)
        other_task, _ = run_steps("toy/vowels", [("python", HALF)], out=runs, data_root=data_root,
                                  warm_evaluator=False)
    made = (current, older, other_task)
    assert [r.state for r in made] == ["scored"] * 3, [r.error for r in made]
    assert older.header.versions["automedbench"] == "0.0.9" != current.header.versions["automedbench"]
    assert other_task.header.hashes["task"] != current.header.hashes["task"]
    assert len({r.header.hashes["options"] for r in made}) == 1  # the options alone do not tell them apart
    assert len({r.header.hashes["conditions"] for r in made}) == 1

    board = build(load_table([runs]), resamples=50)
    assert board.runs_used == 3
    assert sorted(c.n for c in board.cells) == [1, 1, 1]
    assert board.by == ("agent", "task_id", "tier", "conditions")
    assert len({r.header.hashes["scoring"] for r in made}) == 3
    assert len({r["conditions"] for r in flat_rows(board)}) == 3

    # the same harness, task definition and options: one row as before (Python's version is not a condition)
    with monkeypatch.context() as patch:
        patch.setattr(provenance.platform, "python_version", lambda: "3.99.0")
        again, _ = run_steps("toy/vowels", [("python", HALF)], out=runs, data_root=data_root,
                             warm_evaluator=False)
    assert again.header.versions["python"] == "3.99.0"
    assert again.header.hashes["scoring"] == current.header.hashes["scoring"]
    board = build(load_table([runs]), resamples=50)
    assert sorted(c.n for c in board.cells) == [1, 1, 2]


def test_scoring_takes_the_scoring_versions_only_and_splits_one_tasks_runs_only():
    """The harness's and the track's versions score; Python's and the host's do not. Runs of different tasks (a
    `--by agent` or `--by track` row) differ in their scoring by nature and stay pooled; one task's runs that
    differ in it are rows apart whatever the grouping."""
    from automedbench.provenance import scoring_record
    from automedbench_campaign.leaderboard import build
    from automedbench_campaign.store import RunTable

    record = scoring_record("d" * 64, {"automedbench": "1", "track:x": "2", "python": "3.12", "platform": "p"}, "a")
    assert record == {"task definition": "d" * 64, "versions": {"automedbench": "1", "track:x": "2"}, "assets": "a"}

    def row(task_id, scoring, task):
        return {"run_id": f"{task_id}{scoring}", "agent": "a", "task_id": task_id, "track": "toy", "tier": "lite",
                "conditions": "c", "scoring": scoring, "state": "scored", "end_reason": "", "rating": "C",
                "path": "", "overall": task, "agentic": task, "task": task,
                **{s: task for s in ("S1", "S2", "S3", "S4", "S5")}, "turns": 1, "wall_s": 1.0, "tokens_in": 0,
                "tokens_out": 0, "cost_usd": 0.0, "judge_cost_usd": 0.0, "codes": [], "breached": False,
                "submitted": True}

    tasks = RunTable.from_rows([row("toy/one", "x", 0.0), row("toy/two", "y", 1.0)])
    for by in (("agent",), ("track",), ("agent", "task_id", "tier")):
        board = build(tasks, by=by, resamples=20)
        assert "conditions" not in board.by and sum(c.n for c in board.cells) == 2
    assert [c.n for c in build(tasks, by=("agent",), resamples=20).cells] == [2]
    versions = RunTable.from_rows([row("toy/one", "x", 0.0), row("toy/one", "old", 1.0), row("toy/two", "y", 1.0)])
    for by in (("agent",), ("agent", "task_id", "tier")):
        board = build(versions, by=by, resamples=20)
        assert board.by[-1] == "conditions" and sorted(c.n for c in board.cells) == [1, 1, 1]


# ------------------------------------------------------------------ a class told apart by its image size (class 1)

# labels each case by the width in its JPEG header alone: the wider class folder is `normal`
BY_SIZE = """
import json, os
from PIL import Image
data, out = os.environ['DATA_DIR'], os.path.join(os.environ['WORKSPACE_DIR'], 'outputs')
sizes = {}
for case in sorted(os.listdir(data)):
    if os.path.isfile(os.path.join(data, case, 'image.jpg')):
        with Image.open(os.path.join(data, case, 'image.jpg')) as image:
            sizes[case] = image.size
widths = sorted(w for w, _ in sizes.values())
cut = (widths[0] + widths[-1]) / 2
for case, (w, h) in sizes.items():
    os.makedirs(os.path.join(out, case), exist_ok=True)
    label = 'normal' if w > cut else 'pneumonia'
    open(os.path.join(out, case, 'prediction.json'), 'w').write(json.dumps({'label': label}))
print('sizes', sorted(set(sizes.values())))
"""


def test_a_class_the_download_stores_at_other_sizes_is_not_told_apart_by_the_jpeg_header(tmp_path):
    """Kermany's normal radiographs are larger than its pneumonia ones (and the Brain Tumor MRI Dataset's no-tumour
    slices are other sizes than its 512x512 tumour slices): the stager kept every image's size, so an agent reading
    only the staged JPEG headers (PIL's `size`) labelled the wider cases normal: accuracy 1.0, rating A, on noise
    images, through the real runner. Now every case of a staging has one size (the drawn images' median): the
    attacker is at chance."""
    import sys
    from pathlib import Path

    from PIL import Image
    from test_redteam_round18 import stage_and_run

    sys.path.insert(0, str(Path(__file__).parents[1] / "plugins" / "classification" / "tests"))
    import classification_layouts as layouts

    download = layouts.kermany(tmp_path / "download", per_class=50)
    for folder, size in (("NORMAL", (48, 40)), ("PNEUMONIA", (40, 32))):
        for path in (download / "test" / folder).glob("*.jpeg"):
            with Image.open(path) as image:
                image.resize(size).save(path)
    staged, result = stage_and_run("classification/chest-xray-pneumonia", download, BY_SIZE, tmp_path)
    assert len(staged.case_ids) == 100
    assert result.state == "scored", result.error
    assert result.task.partial <= 0.6 and result.aggregate.rating not in ("A", "B"), result.task.partial
    sizes = set()
    for case in staged.case_ids:
        with Image.open(staged.public / case / "image.jpg") as image:
            sizes.add(image.size)
    assert sizes == {(36, 28)}, sizes  # one size: 0.9 of the smallest (40 wide, 32 high; round 22), none enlarged
