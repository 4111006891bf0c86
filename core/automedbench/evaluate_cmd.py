"""Score a folder of outputs (or a built-in baseline) without an agent, through the isolated evaluator."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path

from . import errors, staging
from .evaluator import run_isolated
from .freeze import freeze
from .fsutil import sha256_text
from .gradestep import grade_evaluation
from .plugins import Registry
from .provenance import versions
from .records import Header, Isolation, Result, Runtime
from .resultproof import write_result
from .runfolder import RunFolder
from .scoring import score_result
from .serialize import dumps, write_json


def evaluate_folder(reg: Registry, task_id: str, submission: Path | None, baseline: str | None,
                    data_root: Path, work: Path, task_score: str | None = None,
                    eval_options: dict[str, str] | None = None, backend: str = "process") -> Result:
    t0 = time.monotonic()
    track, task = reg.task(task_id)
    options = track.check_evaluation_options(eval_options or {})
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
                              options=options, backend=backend)
    evaluation = grade_evaluation(reg, track, task, evaluation, options, work)
    header = Header(f"evaluate-{datetime.now(timezone.utc):%Y%m%d-%H%M%S}", task.id, task.track, "-",
                    f"baseline:{baseline}" if baseline else f"folder:{submission}", "-", "-",
                    datetime.now(timezone.utc).isoformat(timespec="seconds"), versions(reg, task.track),
                    {"task": sha256_text(dumps(task)), **staging.digests(task, data_root)},
                    public_source=task.public_source if task.network else "")
    wall = round(time.monotonic() - t0, 3)  # no agent: all of it is the harness's (baseline, freeze, evaluator)
    runtime = Runtime(wall_s=wall, harness_s=wall, eval_s=evaluation.duration_s)
    result = score_result(track, task, header, "scored", errors.END_NO_AGENT, None,
                          runtime, Isolation("-"), evaluation, None, manifest, [],
                          task_score, "-", judged=False)
    write_result(folder, result)
    return result
