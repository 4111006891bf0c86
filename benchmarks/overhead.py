"""Harness overhead of one demo run: everything but the agent's own compute, and peak memory.

The reference is the same tool-call scripts run directly with `python`/`bash` (no harness, no
sandbox, no evaluator): the ratio says what one run costs on top of the agent's own work.
`harness` is broken into the runner's own steps (result.json's `runtime.harness_steps`), and
"after the record" is what follows the sealed record (writing result.json, releasing the workspace).
Run: `.venv/bin/python benchmarks/overhead.py [--repeats 5] [--task segmentation/demo] [--warm-evaluator]`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from automedbench import staging
from automedbench.plugins import registry
from automedbench.runner import Run, RunOptions

TASK = "segmentation/demo"


def bare(run_dir: Path, staged, work: Path) -> float:
    """Re-run the run's own scripts directly, with paths rewritten to plain folders."""
    events = [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines()]
    start = next(e for e in events if e["type"] == "start")
    ws = work / "ws"
    (ws / "outputs").mkdir(parents=True)
    (ws / "plan").mkdir()
    total = 0.0
    for e in events:
        if e.get("type") != "tool" or e.get("name") != "execute_code":
            continue
        code = e["code"].replace(start["workspace_dir"], str(ws)).replace(start["data_dir"], str(staged.public))
        argv = [sys.executable, "-c", code] if e["language"] == "python" else ["bash", "-c", code]
        t = time.perf_counter()
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
        subprocess.run(argv, cwd=ws, capture_output=True, check=True, env=env)
        total += time.perf_counter() - t
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--task", default=TASK)
    parser.add_argument("--warm-evaluator", action="store_true", help="score with the warm evaluator service")
    args = parser.parse_args()
    reg = registry()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        track, task = reg.task(args.task)
        staged = staging.ensure(track, task, root / "data")
        rows, steps = [], []
        for i in range(args.repeats):
            run = Run(RunOptions(args.task, "lite", "reference", out=root / "runs", data_root=root / "data",
                                 warm_evaluator=args.warm_evaluator), reg)
            t = time.monotonic()
            result = run.execute()
            outside = time.monotonic() - t
            assert result.aggregate.overall and result.aggregate.overall > 0.5
            direct = bare(run.run_dir, staged, root / f"bare{i}")
            rt = result.runtime
            rows.append({"wall": rt.wall_s, "exec": rt.exec_s, "agent": rt.agent_s, "harness": rt.harness_s,
                         "eval": rt.eval_s, "judge": rt.judge_s, "bare": direct, "after": outside - rt.wall_s})
            steps.append(rt.harness_steps)
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    self_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    child_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"demo run, median of {args.repeats}: wall {med['wall']:.2f}s = sandboxed agent code {med['exec']:.2f}s "
          f"+ agent {med['agent']:.3f}s + harness {med['harness']:.2f}s (evaluator {med['eval']:.2f}s, "
          f"judge {med['judge']:.3f}s)")
    print(f"same scripts run bare: {med['bare']:.2f}s; sandbox cost {med['exec'] - med['bare']:+.2f}s; "
          f"whole run / bare = {med['wall'] / med['bare']:.2f}x")
    names = sorted({n for s in steps for n in s}, key=lambda n: -statistics.median(s.get(n, 0.0) for s in steps))
    print(f"harness steps, median of {args.repeats} (s): | step | median | max |")
    for name in names:
        values = [s.get(name, 0.0) for s in steps]
        print(f"| {name} | {statistics.median(values):.3f} | {max(values):.3f} |")
    print(f"| after the record (result.json write, workspace release) | {med['after']:.3f} | "
          f"{max(r['after'] for r in rows):.3f} |")
    print(f"peak RSS: harness process {self_mb:.0f} MB, largest child {child_mb:.0f} MB")


if __name__ == "__main__":
    main()
