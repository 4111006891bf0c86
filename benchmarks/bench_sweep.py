"""Sweep overhead per run: what the matrix machinery adds on top of `Run.execute()` itself.

"Outside Run.execute()" is the wall time of the whole loop or sweep minus the time spent inside each
run's execute() (for the pool, as measured in the worker), per run. Three ways to run the same N runs
(scripted `noop` agent on segmentation/demo, so the run is short and the overhead visible): a plain
loop of `Run(...).execute()`, `Sweep` with the inline executor, and `Sweep` with the local process pool
(1 worker: spawn, import, pickling). Then the resume check: how long `Sweep.plan()` takes to find
10 000 finished runs.
Run: `.venv/bin/python benchmarks/bench_sweep.py [--runs 8] [--agent noop]`.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from automedbench import staging
from automedbench.plugins import registry
from automedbench.resultproof import write_result
from automedbench.runfolder import RunFolder
from automedbench.runner import Run, RunOptions
from automedbench_campaign.sweep import RunSpec, Sweep, SweepConfig
from automedbench_campaign.synthetic import template

TASK = "segmentation/demo"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--agent", default="noop")
    parser.add_argument("--finished", type=int, default=10_000, help="finished runs for the resume check")
    args = parser.parse_args()
    reg = registry()
    work = Path(tempfile.mkdtemp(prefix="amb-bench-sweep-"))
    data = work / "data"
    track, task = reg.task(TASK)
    staging.ensure(track, task, data)
    try:
        Run(RunOptions(TASK, "lite", args.agent, out=work / "warm", data_root=data), reg).execute()  # warm caches
        walls = []
        t0 = time.perf_counter()
        for i in range(args.runs):
            t = time.perf_counter()
            Run(RunOptions(TASK, "lite", args.agent, out=work / "plain", data_root=data, run_id=f"r{i}"), reg).execute()
            walls.append(time.perf_counter() - t)
        plain = time.perf_counter() - t0
        rows = [("plain loop of Run.execute()", plain, (plain - sum(walls)) / args.runs)]
        for executor in ("inline", "local"):
            config = SweepConfig.of([args.agent], [TASK], ["lite"], repeats=args.runs, out=work / executor,
                                    executor=executor, data_root=data)
            t = time.perf_counter()
            report = Sweep(config, reg).run()
            wall = time.perf_counter() - t
            assert report.states == {"scored": args.runs}, report.states
            rows.append((f"sweep, {executor} executor", wall, report.overhead_s_per_run or 0.0))
        print(f"{args.runs} runs of {args.agent} on {TASK}; one run alone: median "
              f"{statistics.median(walls):.2f} s")
        for label, wall, extra in rows:
            print(f"{label:<30} {wall:7.2f} s  {wall / args.runs:6.3f} s/run  "
                  f"outside Run.execute() {extra * 1000:6.0f} ms/run")
        # resume: plan() over finished runs (synthetic result.json files under deterministic ids)

        out = work / "resume"
        base = template()
        config = SweepConfig.of(["a"], [TASK], ["lite"], repeats=args.finished, out=out, executor="inline",
                                data_root=data)
        for spec in config.specs():
            base["header"]["run_id"] = spec.run_id
            (out / spec.run_id).mkdir(parents=True)
            write_result(RunFolder(out / spec.run_id), base)
        t = time.perf_counter()
        done, todo = Sweep(config, reg).plan()
        t_plan = time.perf_counter() - t
        assert len(done) == args.finished and not todo and RunSpec("a", TASK, "lite", 0).run_id
        print(f"resume check over {args.finished} finished runs: {t_plan:.2f} s "
              f"({t_plan / args.finished * 1e6:.0f} µs per run)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
