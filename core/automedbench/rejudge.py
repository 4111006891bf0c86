"""Re-grade stored runs with another judge, and measure how far two judges agree.

`rejudge` re-computes S1–S3 and the aggregate through `runner.score_result` (the same rule a fresh run
uses), keeps the previous verdict as `judge.<name>.<timestamp>.json` and rewrites `result.json`
atomically. `agreement` compares two judges item by item over a set of runs: the share of equal values
and Cohen's kappa, per item and pooled over every (run, item) pair both judges graded.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import attrs
from attrs import define

from . import errors
from .plugins import Registry
from .records import Evaluation, JudgeVerdict, Result
from .runner import judge_input, run_rubric, score_result
from .serialize import read_json, write_json
from .trajectory import read_events, torn_line


def run_folder(run: str | Path, runs: Path = Path("runs")) -> Path:
    path = Path(run)
    if not path.exists() and (runs / str(run)).exists():
        path = runs / str(run)
    if path.name == "result.json":
        path = path.parent
    if not path.exists():
        raise errors.UserError(f"{run}: no such file, run folder or run id under {runs}")
    if not (path / "result.json").is_file():
        inside = sorted(p.parent.name for p in path.glob("*/result.json")) if path.is_dir() else []
        hint = f"; it holds {len(inside)} run(s), e.g. {path / inside[0]}" if inside else ""
        raise errors.UserError(f"{run}: not a run folder (no result.json){hint}")
    return path


def check_trajectory(run_dir: Path) -> None:
    """Refuse a torn trajectory: a verdict on the events before the tear would judge part of the run."""
    torn = torn_line(run_dir / "trajectory.jsonl")
    if torn is not None:
        raise errors.UserError(f"{run_dir / 'trajectory.jsonl'}: line {torn} is not valid JSON (torn or edited); "
                               "a verdict on the events before it would judge only part of the run")


def grade(reg: Registry, run_dir: Path, result: Result, judge: Any) -> JudgeVerdict:
    check_trajectory(run_dir)
    track, task = reg.task(result.header.task)
    inp = judge_input(run_dir, track, task, result.header.tier)
    t0 = time.monotonic()
    try:
        verdict = judge.grade(inp)
    except Exception as exc:  # as in a run: an unavailable judge leaves S1–S3 null
        verdict = JudgeVerdict(judge.name, judge.version, [], error=f"{type(exc).__name__}: {exc}")
    if not verdict.duration_s:
        verdict.duration_s = round(time.monotonic() - t0, 3)
    return verdict


def _gradable(run_dir: Path, result: Result) -> None:
    if result.end_reason == errors.END_NO_AGENT:
        raise errors.UserError(f"{run_dir}: an `evaluate` result has no agent run to judge")
    if result.state not in ("scored", "agent_failure"):
        raise errors.UserError(f"{run_dir}: state {result.state}: nothing was scored, nothing to re-grade")
    if result.isolation.breached:
        raise errors.UserError(f"{run_dir}: isolation breach: the run is zeroed and never judged")


def rejudge(reg: Registry, run_dir: Path, judge_name: str, judge_options: dict[str, Any]) -> Result:
    result = read_json(run_dir / "result.json", Result)
    _gradable(run_dir, result)
    track, task = reg.task(result.header.task)
    judge = reg.create("judge", judge_name, **judge_options)
    verdict = grade(reg, run_dir, result, judge)
    current = run_dir / "judge.json"
    if current.exists():
        old = read_json(current, JudgeVerdict)
        stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
        archive = run_dir / f"judge.{old.judge}.{stamp}.json"
        n = 1
        while archive.exists():
            n += 1
            archive = run_dir / f"judge.{old.judge}.{stamp}-{n}.json"
        current.rename(archive)
    write_json(current, verdict)
    evaluation = (read_json(run_dir / "evaluation.json", Evaluation)
                  if (run_dir / "evaluation.json").exists() else None)
    header = attrs.evolve(result.header, judge=judge_name)
    runtime = attrs.evolve(result.runtime, judge_s=verdict.duration_s, judge_cost_usd=verdict.cost_usd)
    codes = [c for c in result.error_codes if c.code != "H-BREACH"]  # score_result adds it again
    task_score = result.task.used if result.task is not None else "strict"
    new = score_result(track, task, header, result.state, result.end_reason, result.error, runtime,
                       result.isolation, evaluation, verdict, result.submission, codes, task_score, header.tier,
                       resolved=run_rubric(track, task, header.tier, read_events(run_dir / "trajectory.jsonl")))
    new.summary_plots = result.summary_plots
    write_json(run_dir / "result.json", new)
    return new


# ------------------------------------------------------------------ agreement


def stored_verdict(run_dir: Path, judge_name: str) -> JudgeVerdict | None:
    """The newest stored verdict by this judge: judge.json first, then archived judge.<name>.*.json."""
    candidates = [run_dir / "judge.json", *sorted(run_dir.glob(f"judge.{judge_name}.*.json"), reverse=True)]
    for path in candidates:
        if path.is_file():
            verdict = read_json(path, JudgeVerdict)
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
