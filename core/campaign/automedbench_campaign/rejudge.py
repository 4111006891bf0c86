"""Re-grade stored runs with another judge, and measure how far two judges agree.

`rejudge` re-computes S1–S3 and the aggregate through `scoring.score_result` (the same rule a fresh run
uses), keeps the previous verdict as `judge.<name>.<timestamp>.json` and rewrites `result.json`
atomically. `agreement` compares two judges item by item over a set of runs: the share of equal values
and Cohen's kappa, per item and pooled over every (run, item) pair both judges graded.
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import attrs
from attrs import define
from automedbench.api import END_NO_AGENT, InfrastructureError, JudgeVerdict, Result, UserError, dumps
from automedbench.engine import (
    Registry,
    RunFolder,
    ScoreInputs,
    check_or_reason,
    copy_verified,
    graded,
    judge_input,
    mask_value,
    regraded_hashes,
    run_rubric,
    score_result,
    write_result,
    write_verified,
)


class NotRegraded(Exception):
    """The new judge could not grade a run (its endpoint down, an unknown model, replies it never got right): the
    run keeps the grade it had, since a verdict of nulls in its place emptied a graded run's S1-S3 and lifted it off
    the leaderboard's stage means with the command reporting success."""


def grade(reg: Registry, folder: RunFolder, result: Result, judge: Any) -> JudgeVerdict:
    folder.check_trajectory()
    track, task = reg.task(result.header.task)
    inp = judge_input(folder, track, task, result.header.tier)
    t0 = time.monotonic()
    verdict = graded(judge, inp)  # as in a run: bounded by the harness's facts; a judge that fails leaves S1–S3 null
    if not verdict.duration_s:
        verdict.duration_s = round(time.monotonic() - t0, 3)
    return verdict


def check_genuine(folder: RunFolder) -> None:
    """Refuse a run the harness did not write, or whose evidence changed since (`resultproof`): rejudge
    re-signs what it rewrites, so it re-signs only what it verified."""
    why = check_or_reason(folder)
    if why is not None:
        raise UserError(f"{folder.path}: not re-graded: {why}")


def _gradable(folder: RunFolder, result: Result) -> None:
    if result.end_reason == END_NO_AGENT:
        raise UserError(f"{folder.path}: an `evaluate` result has no agent run to judge")
    if result.state not in ("scored", "agent_failure"):
        raise UserError(f"{folder.path}: state {result.state}: nothing was scored, nothing to re-grade")
    if result.isolation.breached:
        raise UserError(f"{folder.path}: isolation breach: the run is zeroed and never judged")


def _archive_verdict(folder: RunFolder) -> None:
    """Move the current judge.json aside as judge.<its judge>.<timestamp>[-n].json."""
    if not folder.judge.exists():
        return
    old = folder.load_judge()
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    n = 1
    while (archive := folder.archived_judge(old.judge, stamp, n)).exists():
        n += 1
    folder.judge.rename(archive)


def rejudge(reg: Registry, folder: RunFolder, judge_name: str, judge_options: dict[str, Any]) -> Result:
    """Re-grade a genuine run from a verified copy of it (`copy_verified`) and sign the evidence as verified plus
    the new verdict: a file swapped in the folder meanwhile (the judge's grading takes seconds) is neither graded
    nor signed, and the run then reads as not genuine."""
    with tempfile.TemporaryDirectory(prefix="automedbench-rejudge-") as private:
        found = copy_verified(folder, Path(private))
        if isinstance(found, str):
            raise UserError(f"{folder.path}: not re-graded: {found}")
        copy, files = found
        return _regrade(reg, folder, copy, files, judge_name, judge_options)


def _regrade(reg: Registry, folder: RunFolder, copy: RunFolder, files: dict[str, str], judge_name: str,
             judge_options: dict[str, Any]) -> Result:
    result = copy.load_result()
    _gradable(folder, result)
    track, task = reg.task(result.header.task)
    judge = reg.create("judge", judge_name, **judge_options)
    verdict = grade(reg, copy, result, judge)
    if verdict.error:
        old = result.judge
        version = f" (version {old.judge_version})" if old and old.judge_version else ""
        kept = (f"its {old.judge} judge{version} grade" if old and not old.error
                else "its S1–S3 ungraded, as they were")
        raise NotRegraded(f"{folder.path}: not re-graded: the {judge_name} judge could not grade it: {verdict.error}; "
                          f"the run keeps {kept}, unchanged")
    _archive_verdict(folder)
    write_verified(folder, RunFolder.JUDGE, dumps(verdict) + "\n", files)
    evaluation = copy.load_evaluation()
    # graded by another judge (its options), on the rubric installed now: a run of other conditions, never pooled
    # with the runs still graded as they were made (the digests say so; the proof signs them)
    kept = {k: v for k, v in (result.header.options or {}).items() if k != "judge_options"}
    if judge_options:  # kept as a run's header keeps them: no credential (the digest has them as given)
        kept["judge_options"] = mask_value("judge_options", dict(judge_options))
    header = attrs.evolve(result.header, judge=judge_name,
                          options=None if result.header.options is None else kept,
                          hashes=regraded_hashes(result.header.hashes, judge_name, judge_options, reg, task))
    runtime = attrs.evolve(result.runtime, judge_s=verdict.duration_s, judge_cost_usd=verdict.cost_usd)
    codes = [c for c in result.error_codes if c.code != "H-BREACH"]  # score_result adds it again
    task_score = result.task.used if result.task is not None else "strict"
    new = score_result(ScoreInputs(track=track, task=task, header=header, state=result.state,
                                   end_reason=result.end_reason, runtime=runtime, isolation=result.isolation,
                                   manifest=result.submission, evaluation=evaluation, verdict=verdict,
                                   error=result.error, codes=codes, task_score=task_score,
                                   resolved=run_rubric(track, task, header.tier, copy.events())))
    new.summary_plots = result.summary_plots
    unsigned = write_result(folder, new, files=files)
    if unsigned:
        raise InfrastructureError(f"{folder.path}: re-graded, but {unsigned}")
    return new


# ------------------------------------------------------------------ agreement


def stored_verdict(folder: RunFolder, judge_name: str) -> JudgeVerdict | None:
    """The newest stored verdict by this judge: judge.json first, then archived judge.<name>.*.json."""
    for path in folder.stored_judges(judge_name):
        if path.is_file():
            verdict = folder.load_judge(path)
            if verdict.judge == judge_name and not verdict.error:
                return verdict
    return None


def cohen_kappa(a: list[Any], b: list[Any]) -> float | None:
    """(p_o − p_e) / (1 − p_e); None when undefined (no pairs, or both judges constant and equal)."""
    if len(a) != len(b):
        raise ValueError("kappa needs paired ratings")
    n = len(a)
    if n == 0:
        return None
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    ca, cb = Counter(a), Counter(b)
    expected = sum(ca[k] * cb[k] for k in set(ca) | set(cb)) / (n * n)
    if expected == 1.0:
        return None
    return (observed - expected) / (1.0 - expected)


@define
class ItemAgreement:
    item: str
    n: int
    agreement: float | None
    kappa: float | None


def values(verdict: JudgeVerdict) -> dict[str, float]:
    return {i.id: i.value for i in verdict.items if i.value is not None and not i.auto}


def agreement(pairs: list[tuple[JudgeVerdict, JudgeVerdict]]) -> tuple[list[ItemAgreement], ItemAgreement]:
    """Per-item and pooled agreement over the items both verdicts of each pair graded."""
    by_item: dict[str, tuple[list[float], list[float]]] = {}
    for va, vb in pairs:
        a, b = values(va), values(vb)
        for item in sorted(set(a) & set(b)):
            xs, ys = by_item.setdefault(item, ([], []))
            xs.append(a[item])
            ys.append(b[item])

    def summary(name: str, xs: list[float], ys: list[float]) -> ItemAgreement:
        n = len(xs)
        share = sum(x == y for x, y in zip(xs, ys, strict=True)) / n if n else None
        kappa = cohen_kappa(xs, ys)
        return ItemAgreement(name, n, None if share is None else round(share, 4),
                             None if kappa is None else round(kappa, 4))

    items = [summary(item, xs, ys) for item, (xs, ys) in sorted(by_item.items())]
    all_x = [x for xs, _ in by_item.values() for x in xs]
    all_y = [y for _, ys in by_item.values() for y in ys]
    return items, summary("pooled", all_x, all_y)
