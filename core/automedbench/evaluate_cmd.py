"""Score a folder of outputs (or a built-in baseline) without an agent, through the isolated evaluator."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path

from attrs import Factory, define

from . import errors, staging
from .evaluator import grade_evaluation, run_isolated
from .freeze import freeze
from .fsutil import sha256_text
from .needs import scoring_gap
from .plugins import Registry
from .provenance import versions
from .records import Header, Isolation, Result, Runtime
from .resultproof import write_result
from .runfolder import RunFolder
from .scoring import ScoreInputs, score_result
from .serialize import dumps, write_json


@define(kw_only=True)
class EvaluateOptions:
    """What `automedbench evaluate` scores: one task's outputs, from a folder (`submission`) or a track's baseline
    by name, with the data staged under `data_root`; the frozen copy and the records go into `work`."""

    task: str
    data_root: Path
    work: Path
    submission: Path | None = None
    baseline: str | None = None
    task_score: str | None = None  # strict or partial; None: the task file's
    eval_options: dict[str, str] = Factory(dict)  # the track's evaluation options (`--eval-option`)
    backend: str = "process"  # the evaluator backend that scores it
    pictures: bool = False  # each case's picture into `work/pictures/` for the page (`evaluate --out`)


def evaluate_folder(reg: Registry, o: EvaluateOptions) -> Result:
    """Score outputs without an agent, through the same freeze, isolated evaluator, grading step and scoring as a
    run (S1–S3 not graded); the Result, also written as `work/result.json`."""
    t0 = time.monotonic()
    submission, baseline, data_root, work = o.submission, o.baseline, o.data_root, o.work
    track, task = reg.task(o.task)
    options = track.check_evaluation_options(o.eval_options)
    gap = scoring_gap(track, task, o.backend)  # before staging: the metric cannot run here, say so in one line
    if gap is not None:
        raise errors.UserError(gap)
    staged = staging.ensure(track, task, data_root)
    work.mkdir(parents=True, exist_ok=True)
    if baseline is not None:
        offered = track.baselines()
        if baseline not in offered:
            raise errors.UserError(f"unknown baseline {baseline!r}{errors.did_you_mean(baseline, list(offered))}")
        submission = work / "baseline"
        track.write_baseline(task, baseline, staged, submission)
    assert submission is not None
    if not submission.is_dir():
        raise errors.UserError(f"submission folder {submission} does not exist")
    folder = RunFolder(work)  # the same names as a run's folder, without the agent's files
    manifest = freeze(submission, folder.submission, submitted=True)
    write_json(folder.manifest, manifest)
    evaluation = run_isolated(task.id, staged, folder.submission, folder.manifest, folder.evaluation,
                              options=options, backend=o.backend, pictures=o.pictures)
    evaluation = grade_evaluation(reg, track, task, evaluation, options, work)
    header = Header(f"evaluate-{datetime.now(timezone.utc):%Y%m%d-%H%M%S}", task.id, task.track, "-",
                    f"baseline:{baseline}" if baseline else f"folder:{submission}", "-", "-",
                    datetime.now(timezone.utc).isoformat(timespec="seconds"), versions(reg, task.track),
                    {"task": sha256_text(dumps(task)), **staging.digests(task, data_root)},
                    public_source=task.public_source if task.network else "")
    wall = round(time.monotonic() - t0, 3)  # no agent: all of it is the harness's (baseline, freeze, evaluator)
    runtime = Runtime(wall_s=wall, harness_s=wall, eval_s=evaluation.duration_s)
    result = score_result(ScoreInputs(track=track, task=task, header=header, state="scored",
                                      end_reason=errors.END_NO_AGENT, runtime=runtime, isolation=Isolation("-"),
                                      manifest=manifest, evaluation=evaluation, task_score=o.task_score, judged=False))
    write_result(folder, result)
    return result
