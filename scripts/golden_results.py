#!/usr/bin/env python3
"""Golden scores: every scripted agent variant on every demo task at every tier the task has.

Refactors that must not change a score run this before and after and compare the two files; changes
that move scores on purpose print the difference with `--compare`. Only scores are kept (stages,
items, Agentic, Task, Overall, rating, run state): no timestamps, versions, hashes or rationales.

    python scripts/golden_results.py --data-root /tmp/golden-data --out before.json [--jobs 2]
    python scripts/golden_results.py --data-root /tmp/golden-data --out after.json
    python scripts/golden_results.py --compare before.json after.json
    python scripts/golden_results.py --full ...   # the whole result.json, see `full`
    python scripts/golden_results.py --data-root /tmp/golden-data --warm-evaluator --out warm.json

Use the same --data-root for both runs: every staging of a demo draws a fresh secret seed (so an agent
cannot regenerate the references), so scores are only comparable on one staged copy. The tasks are every
registered demo task (`<track>/demo*`), each variant of the scripted agent, every tier the task has.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any


def demo_tasks() -> list[str]:
    """Every installed track's generated demos: the tasks any checkout can run offline."""
    from automedbench.plugins import registry

    reg = registry()
    return sorted(task_id for task_id in reg.tasks() if task_id.split("/", 1)[1].startswith("demo"))


def normalise(result: Any) -> dict[str, Any]:
    """The score-bearing part of a Result, in a stable shape."""
    agg = result.aggregate
    task = result.task
    return {
        "state": result.state,
        "stages": {s.stage: {"score": s.score, "items": {i.id: i.value for i in s.items}} for s in result.stages},
        "agentic": agg.agentic,
        "agentic_nulls_as_zero": agg.agentic_nulls_as_zero,
        "task": agg.task,
        "overall": agg.overall,
        "rating": agg.rating,
        "rating_reason": agg.rating_reason,
        "metric": None if task is None else {"strict": task.strict, "partial": task.partial, "used": task.used},
        "codes": sorted({c.code for c in result.error_codes}),
    }


# What may differ between two runs of the same agent on the same task: when, on what, under which
# random run id and temporary folder, and how long each phase took. Everything else in result.json is kept.
VOLATILE = {"run_id", "started_at", "versions", "hashes", "wall_s", "agent_s", "exec_s", "harness_s", "eval_s",
            "judge_s", "duration_s", "latency_s", "peak_rss_mb", "harness_steps", "startup_s", "harness_cpu_s"}


QUOTA_SIZE = re.compile(r"(workspace quota )\d+(?= MB)")


def full(run_dir: Path, tmp: str) -> Any:
    """The whole stored result.json minus VOLATILE keys, with the temporary folder's path replaced."""
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in VOLATILE}
        if isinstance(value, list):
            return [strip(v) for v in value]
        if isinstance(value, str):
            value = value.replace(run_dir.name, "<run>").replace(tmp, "<tmp>")
            return QUOTA_SIZE.sub(r"\1<MB>", value)  # sized from the free disk at the time: varies run to run
        return value

    return strip(json.loads((run_dir / "result.json").read_text()))


def combinations(tasks: list[str], variants: list[str] | None) -> list[tuple[str, str, str]]:
    from automedbench.agents.scripted import VARIANTS
    from automedbench.plugins import registry

    reg = registry()
    out = []
    for task_id in tasks:
        _, task = reg.task(task_id)
        for tier in (t for t in ("lite", "standard", "pro") if t in task.tiers):
            out.extend((task_id, tier, v) for v in (variants or list(VARIANTS)))
    return out


def run_one(args: tuple[str, str, str, str, str, bool, bool]) -> tuple[str, dict[str, Any]]:
    task_id, tier, variant, data_root, out, whole, warm = args
    from automedbench import interrupt
    from automedbench.testing import run_task

    interrupt.check()  # a SIGTERM closed an earlier run of this process as cancelled: start no other

    result, run_dir = run_task(task_id, variant, out=Path(out), data_root=Path(data_root), tier=tier,
                               warm_evaluator=warm)
    return f"{task_id} {tier} {variant}", full(run_dir, str(Path(out).parent)) if whole else normalise(result)


def collect(tasks: list[str], variants: list[str] | None, jobs: int, whole: bool = False,
            data_root: str | None = None, warm: bool = False) -> dict[str, Any]:
    from automedbench.testing import stage_task

    with tempfile.TemporaryDirectory(prefix="amb-golden-") as tmp:
        data_root = data_root or os.environ.get("AUTOMEDBENCH_DATA") or str(Path(tmp) / "data")
        for task_id in tasks:  # staged once, before the runs share it
            stage_task(task_id, Path(data_root))
        work = [(t, tier, v, data_root, str(Path(tmp) / "runs"), whole, warm)
                for t, tier, v in combinations(tasks, variants)]
        pairs = run_pool(work, jobs) if jobs > 1 else [run_one(w) for w in work]
    return dict(sorted(pairs))


def run_pool(work: list[tuple], jobs: int) -> list[tuple[str, dict[str, Any]]]:
    """`run_one` over `work` in `jobs` processes; interrupted, queued runs are dropped and the signal is passed
    on to the workers, whose runs close as cancelled and release their workspaces before this returns."""
    import signal

    from automedbench import interrupt

    pool = ProcessPoolExecutor(jobs, initializer=interrupt.install)
    try:
        pairs = list(pool.map(run_one, work))
    except KeyboardInterrupt:
        workers = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, interrupt.received() or signal.SIGINT)
        for proc in workers:
            proc.join()
        raise
    pool.shutdown()
    return pairs


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out.update(flatten(inner, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}


def compare(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """One line per differing value (`run: field before -> after`); empty when identical."""
    lines = []
    for run in sorted(set(before) | set(after)):
        if run not in before or run not in after:
            lines.append(f"{run}: {'only after' if run not in before else 'only before'}")
            continue
        a, b = flatten(before[run]), flatten(after[run])
        for key in sorted(set(a) | set(b)):
            if a.get(key, "<absent>") != b.get(key, "<absent>"):
                lines.append(f"{run}: {key} {a.get(key, '<absent>')!r} -> {b.get(key, '<absent>')!r}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="write the golden scores here (JSON); default: stdout")
    parser.add_argument("--task", action="append", dest="tasks", help="limit to a task (repeatable)")
    parser.add_argument("--variant", action="append", dest="variants", help="limit to a variant (repeatable)")
    parser.add_argument("--jobs", type=int, default=1, help="runs in parallel (default 1)")
    parser.add_argument("--data-root", help="staged data shared by the before and after runs "
                        "[default: $AUTOMEDBENCH_DATA, else a temporary copy: then nothing is comparable]")
    parser.add_argument("--full", action="store_true",
                        help="keep the whole result.json (less timestamps, versions, hashes, timings)")
    parser.add_argument("--warm-evaluator", action="store_true",
                        help="score with the warm evaluator service (compare with a cold file: must be identical)")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), help="diff two golden files and exit")
    args = parser.parse_args(argv)
    if args.compare:
        before, after = (json.loads(Path(p).read_text()) for p in args.compare)
        lines = compare(before, after)
        print("\n".join(lines) if lines else f"identical: {len(before)} runs")
        return 1 if lines else 0
    if not (args.data_root or os.environ.get("AUTOMEDBENCH_DATA")):
        print("note: no --data-root: the demos are staged with fresh seeds, so these scores compare with "
              "no other run", file=sys.stderr)
    from automedbench import interrupt

    with interrupt.terminate_as_interrupt():  # SIGTERM/SIGHUP: runs close as cancelled, workspaces unmounted
        try:
            scores = collect(args.tasks or demo_tasks(), args.variants, args.jobs, args.full, args.data_root,
                             args.warm_evaluator)
        except KeyboardInterrupt as exc:
            print(f"interrupted ({exc or 'Ctrl-C'}): no golden file written", file=sys.stderr)
            return interrupt.exit_status()
    text = json.dumps(scores, indent=1, sort_keys=True) + "\n"
    if args.out:
        Path(args.out).write_text(text)
        print(f"{len(scores)} runs -> {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
