"""Evaluation time of every demo, cold (a fresh `python -I -S` evaluator per run) against warm (one evaluator
service kept between runs, as a sweep uses it), on the same frozen submission, in one process.

Each demo is run once with the scripted reference agent; its submission is then scored `--repeats` times
cold and `--repeats` times warm (after one warm-up request that starts the service). The evaluations must
be identical apart from their duration. Beside the wall times, the CPU time of the evaluating processes
(cold: the evaluator child, reaped; warm: every process in the service's session, METEOR's JVM included),
which a loaded machine inflates far less than wall time.
Every installed demo task (as `automedbench tasks` lists them) unless `--tasks` names some; a row whose median
warm CPU exceeds 0.3 s is marked, and the exit status is 1 when any row is marked or not identical.
Run: `.venv/bin/python benchmarks/bench_warm_eval.py [--repeats 3] [--tasks a/demo,b/demo]`.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from automedbench import staging
from automedbench.evaluator import run_isolated
from automedbench.freeze import freeze
from automedbench.plugins import registry
from automedbench.runfolder import RunFolder
from automedbench.runner import Run, RunOptions
from automedbench.serialize import write_json
from automedbench_campaign import evalservice

TARGET_CPU_S = 0.3  # a warm evaluation of any demo (issue 38)


def children_cpu() -> float:
    """CPU seconds of this process's reaped children (a cold evaluator is reaped when it ends)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def session_cpu(leader: int) -> float:
    """CPU seconds so far of every live process in the session `leader` leads, with their reaped children."""
    ticks, total = os.sysconf("SC_CLK_TCK"), 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == leader:  # the session id; then utime, stime, cutime, cstime
            total += sum(int(f) for f in fields[11:15])
    return total / ticks


def service_cpu(service: evalservice.EvalService) -> float:
    """CPU seconds of the warm service's current process and what it started (0 before it starts)."""
    return session_cpu(service.proc.pid) if service.proc is not None else 0.0


def timed(task_id: str, staged, outputs: Path, root: Path, backend: str,
          cpu: Callable[[], float]) -> tuple[float, float, dict]:
    folder = RunFolder(root)
    write_json(folder.manifest, freeze(outputs, folder.submission, submitted=True))
    c, t = cpu(), time.perf_counter()
    run_isolated(task_id, staged, folder.submission, folder.manifest, folder.evaluation, backend=backend)
    elapsed, used = time.perf_counter() - t, cpu() - c
    data = json.loads(folder.evaluation.read_text())
    data.pop("duration_s")
    return elapsed, used, data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tasks", default="", help="comma-separated task ids (default: every installed demo)")
    args = parser.parse_args()
    reg = registry()
    known = reg.tasks()
    tasks = args.tasks.split(",") if args.tasks else sorted(t for t in known if reg.task(t)[1].demo)
    failed = []
    print("| demo | cold evaluation (s) | warm evaluation (s) | warm first request (s) | cold / warm | cold CPU (s) "
          "| warm CPU (s) | identical |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for task_id in tasks:
            if task_id not in known:
                print(f"| {task_id} | not installed | | | | | | |")
                continue
            track, task = reg.task(task_id)
            staged = staging.ensure(track, task, root / "data")
            run = Run(RunOptions(task_id, "lite", "reference", out=root / "runs", data_root=root / "data"), reg)
            result = run.execute()
            assert result.state == "scored", (task_id, result.state, result.error)
            outputs = root / "outputs" / task_id
            shutil.copytree(run.run_dir / "submission", outputs, ignore=shutil.ignore_patterns("MANIFEST.json"))
            service = evalservice.EvalService()
            evalservice._SERVICE = service
            try:
                work = root / "eval" / task_id
                cold = [timed(task_id, staged, outputs, work / f"cold{i}", "process", children_cpu)
                        for i in range(args.repeats)]
                warm_cpu = functools.partial(service_cpu, service)
                first = timed(task_id, staged, outputs, work / "warm-first", "warm", warm_cpu)
                warm = [timed(task_id, staged, outputs, work / f"warm{i}", "warm", warm_cpu)
                        for i in range(args.repeats)]
            finally:
                service.close()
            same = all(d == cold[0][2] for _, _, d in [*cold, first, *warm])
            c, w = statistics.median(t for t, _, _ in cold), statistics.median(t for t, _, _ in warm)
            c_cpu, w_cpu = statistics.median(u for _, u, _ in cold), statistics.median(u for _, u, _ in warm)
            over = w_cpu > TARGET_CPU_S
            if over or not same:
                failed.append(task_id)
            print(f"| {task_id} | {c:.2f} | {w:.2f} | {first[0]:.2f} | {c / w:.1f}x | {c_cpu:.2f} | "
                  f"{w_cpu:.2f}{' (over)' if over else ''} | {'yes' if same else 'NO'} |", flush=True)
    if failed:
        print(f"over {TARGET_CPU_S} s warm CPU or not identical: {', '.join(failed)}")
        raise SystemExit(1)


if __name__ == "__main__":
    main()
