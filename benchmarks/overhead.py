"""Harness overhead of one demo run: everything but the agent's own compute, and peak memory.

Two measurements:

- in-process (default): `Run(...).execute()` of the scripted reference agent, `--repeats` times in one
  process. The reference is the same tool-call scripts run directly with `python`/`bash` (no harness, no
  sandbox, no evaluator): the ratio says what one run costs on top of the agent's own work. `harness` is
  broken into the runner's own steps (result.json's `runtime.harness_steps`), and "after the record" is what
  follows the sealed record (writing result.json, releasing the workspace).
- `--cli`: a one-off command-line run, `automedbench run --task TASK --agent reference --quiet`, each in a
  fresh process (after one unmeasured run that stages the data and writes the modules' bytecode, as a
  user's second run finds them): the harness process's own CPU over its whole life (start-up, imports, turn
  loop, scoring, result.json, workspace release, exit) read at its exit, beside what result.json records
  (`runtime.harness_cpu_s`, up to the sealed record; `runtime.startup_s`), the evaluator's and the agent's
  tool calls' wall time, and the process tree's CPU. The agent's tool calls and the evaluator run in other
  processes and are not the harness's.
Run: `.venv/bin/python benchmarks/overhead.py [--repeats 5] [--task segmentation/demo] [--warm-evaluator]`
and `.venv/bin/python benchmarks/overhead.py --cli [--repeats 5]`.
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

TASK = "segmentation/demo"
TARGET_CPU_S = 0.5  # a one-off run's own harness time (issue 38)
# The console script's own code (`sys.exit(main())`), with this process's CPU reported when it exits.
LAUNCHER = ("import atexit, json, os, resource, sys\n"
            "def _report():\n"
            "    u = resource.getrusage(resource.RUSAGE_SELF)\n"
            "    with open(os.environ['OVERHEAD_REPORT'], 'w') as fh:\n"
            "        json.dump({'cpu_s': u.ru_utime + u.ru_stime, 'peak_rss_mb': u.ru_maxrss / 1024}, fh)\n"
            "atexit.register(_report)  # registered first: runs last, after the warm evaluator's own exit hook\n"
            "from automedbench.cli import main\n"
            "sys.argv[0] = 'automedbench'\n"
            "sys.exit(main())\n")


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


def in_process(args: argparse.Namespace) -> None:
    from automedbench import staging
    from automedbench.plugins import registry
    from automedbench.runner import Run, RunOptions

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


def cli_run(root: Path, task: str, extra: list[str]) -> dict[str, float]:
    """One `automedbench run` in a fresh process: its own CPU at exit and result.json's figures."""
    report = root / f"report-{time.monotonic_ns()}.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # a user's default
    env["OVERHEAD_REPORT"] = str(report)
    argv = [sys.executable, "-c", LAUNCHER, "run", "--task", task, "--agent", "reference", "--quiet",
            "--out", str(root / "runs"), "--data-root", str(root / "data"), *extra]
    started = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = proc.stdout.read() if proc.stdout else ""
    status = proc.wait()
    wall = time.monotonic() - started
    if status != 0:
        raise SystemExit(f"the run failed:\n{output}")
    run_dir = Path(output.split("result: ", 1)[1].split()[0]).parent
    runtime = json.loads((run_dir / "result.json").read_text())["runtime"]
    own = json.loads(report.read_text())
    nan = float("nan")  # a harness older than these fields (a before/after comparison) records neither
    return {"process_cpu": own["cpu_s"], "recorded_cpu": runtime.get("harness_cpu_s", nan),
            "startup": runtime.get("startup_s", nan),
            "wall": wall, "exec_wall": runtime["exec_s"],
            "eval_wall": runtime["harness_steps"].get("evaluation", 0.0) + runtime["harness_steps"].get(
                "pilot_checks", 0.0), "peak_rss_mb": own["peak_rss_mb"]}


def one_off(args: argparse.Namespace) -> None:
    extra = ["--warm-evaluator"] if args.warm_evaluator else []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cli_run(root, args.task, extra)  # stages the demo, writes bytecode: what a second run finds
        rows = [cli_run(root, args.task, extra) for _ in range(args.repeats)]
    load = os.getloadavg()[0]
    print(f"`automedbench run --task {args.task} --agent reference --quiet` {' '.join(extra)}, {args.repeats} "
          f"fresh processes (load average {load:.1f} on {os.cpu_count()} cores): | quantity | median | min | max |")
    labels = {"process_cpu": "harness process CPU, whole life (s)",
              "recorded_cpu": "result.json runtime.harness_cpu_s (up to the sealed record)",
              "startup": "result.json runtime.startup_s (process start to run start, wall)",
              "wall": "wall, whole command (s)", "exec_wall": "agent's tool calls, wall (s)",
              "eval_wall": "evaluation + pilot check, wall (s)", "peak_rss_mb": "peak RSS, harness process (MB)"}
    for key, label in labels.items():
        values = [r[key] for r in rows]
        print(f"| {label} | {statistics.median(values):.3f} | {min(values):.3f} | {max(values):.3f} |")
    verdict = "within" if statistics.median(r["process_cpu"] for r in rows) <= TARGET_CPU_S else "OVER"
    print(f"harness process CPU {verdict} the {TARGET_CPU_S} s target")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--task", default=TASK)
    parser.add_argument("--warm-evaluator", action="store_true", help="score with the warm evaluator service")
    parser.add_argument("--cli", action="store_true", help="one-off command-line runs, each in a fresh process")
    args = parser.parse_args()
    (one_off if args.cli else in_process)(args)


if __name__ == "__main__":
    main()
