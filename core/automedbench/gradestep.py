"""The model-graded scoring step's place in the run: after the isolated evaluation, before the final score.

The evaluator has no network and no keys, so a metric that needs a model returns `GradeRequest`s; a plugin
answers them (`automedbench_grade_requests`: automedbench-models asks the grader models, caches and signs
the replies). Null rule: with no plugin to answer, every grade is null with the reason and the run stays
`scored`, as for an unreachable backend (the agent did nothing wrong; the evaluator's facts stand); the same
when the plugin raises.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import attrs

from .grades import NO_GRADER, Grade, GradeLog, GraderUse
from .records import Evaluation, TaskSpec
from .runfolder import RunFolder
from .serialize import write_json

GRADES_FILE = RunFolder.GRADES


def grade_evaluation(reg: Any, track: Any, task: TaskSpec, evaluation: Evaluation, options: dict[str, str],
                     folder: Path, trusted: bool = True) -> Evaluation:
    """Answer the evaluation's grade requests, record them in `folder/grades.json`, fold them into the metric
    through `track.apply_grades`, and store the graded evaluation as `folder/evaluation.json` (what rejudge
    and the code detectors read). An evaluation without requests comes back unchanged, nothing written.
    `trusted`: False for an unverified run, whose grades use no cache a verified run reads."""
    requests = evaluation.grade_requests
    if not requests:
        return evaluation
    t0 = time.monotonic()
    why = NO_GRADER
    try:
        log = reg.pm.hook.automedbench_grade_requests(requests=requests, options=options, registry=reg,
                                                      trusted=trusted)
    except Exception as exc:  # a grading plugin's bug (on agent text, say): null grades, never a harness failure
        log, why = None, f"the grading plugin failed: {type(exc).__name__}: {str(exc)[:200]}"
    if log is None:
        counts = Counter(r.grader for r in requests)
        log = GradeLog([GraderUse(g, "", "", requests=n, failed=n, error=why) for g, n in counts.items()],
                       [Grade(r.case_id, r.grader, r.tag, error=why) for r in requests])
    log.duration_s = round(time.monotonic() - t0, 3)
    metric = track.apply_grades(task, evaluation.metric, log.grades)
    if log.components:
        metric = attrs.evolve(metric, components={**metric.components, **log.components})
    graded = attrs.evolve(evaluation, metric=metric)
    names = RunFolder(folder)
    write_json(names.grades, log)
    write_json(names.evaluation, graded)
    return graded
