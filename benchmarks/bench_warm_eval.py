"""Evaluation time of every demo, cold (a fresh `python -I -S` evaluator per run) against warm (one evaluator
service kept between runs, as a sweep uses it), on the same frozen submission, in one process.

Each demo is run once with the scripted reference agent; its submission is then scored `--repeats` times
cold and `--repeats` times warm (after one warm-up request that starts the service). The evaluations must
be identical apart from their duration. Run: `.venv/bin/python benchmarks/bench_warm_eval.py [--repeats 3]`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from automedbench import staging
from automedbench.evaluator import run_isolated
from automedbench.freeze import freeze
from automedbench.plugins import registry
from automedbench.runfolder import RunFolder
from automedbench.runner import Run, RunOptions
from automedbench.serialize import write_json
from automedbench_campaign import evalservice

DEMOS = ["segmentation/demo", "vqa/demo", "enhancement/demo-ldct", "enhancement/demo-sr", "detection/demo",
         "report_gen/demo"]


def timed(task_id: str, staged, outputs: Path, root: Path, backend: str) -> tuple[float, dict]:
    folder = RunFolder(root)
    write_json(folder.manifest, freeze(outputs, folder.submission, submitted=True))
    t = time.perf_counter()
    run_isolated(task_id, staged, folder.submission, folder.manifest, folder.evaluation, backend=backend)
    elapsed = time.perf_counter() - t
    data = json.loads(folder.evaluation.read_text())
    data.pop("duration_s")
    return elapsed, data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tasks", default=",".join(DEMOS))
    args = parser.parse_args()
    reg = registry()
    known = reg.tasks()
    print("| demo | cold evaluation (s) | warm evaluation (s) | warm first request (s) | cold / warm | identical |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for task_id in args.tasks.split(","):
            if task_id not in known:
                print(f"| {task_id} | not installed | | | | |")
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
                cold = [timed(task_id, staged, outputs, work / f"cold{i}", "process") for i in range(args.repeats)]
                first = timed(task_id, staged, outputs, work / "warm-first", "warm")
                warm = [timed(task_id, staged, outputs, work / f"warm{i}", "warm") for i in range(args.repeats)]
            finally:
                service.close()
            same = all(d == cold[0][1] for _, d in [*cold, first, *warm])
            c, w = statistics.median(t for t, _ in cold), statistics.median(t for t, _ in warm)
            print(f"| {task_id} | {c:.2f} | {w:.2f} | {first[0]:.2f} | {c / w:.1f}x | {'yes' if same else 'NO'} |",
                  flush=True)


if __name__ == "__main__":
    main()
