"""Enhancement evaluator against plain scikit-image on 100 LDCT cases: wall time and peak memory, same run.

    .venv/bin/python benchmarks/bench_enhancement.py [--cases 100] [--repeats 3]

Stages `enhancement/demo-ldct` with 100 cases (the demo generator, 512x512 HU) into a temporary data
root, writes a Gaussian-baseline submission, then alternates two child processes per repeat:
- harness: `automedbench.evaluator.evaluate` (no-follow header-first checker, reference and input read,
  SSIM on the full window and the soft-tissue window, PSNR, output facts, aggregation);
- skimage: a bare loop doing the same numbers with `skimage.metrics.structural_similarity` (same
  settings) and numpy PSNR, files read with `np.load`, no checks.
Peak memory is each child's maximum resident set (wait4 rusage). Prints medians and the ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

TASK = "enhancement/demo-ldct"


def prepare(root: Path, cases: int) -> None:
    import attrs
    from automedbench.plugins import registry
    from automedbench_enhancement.baselines import write
    from automedbench_enhancement.data.demo import stage_demo

    _, task = registry().task(TASK)
    task = attrs.evolve(task, case_count=cases)
    staged = stage_demo(task, root / "task")
    write(task, "gaussian", staged, root / "submission")


def harness(root: Path, cases: int) -> float:
    import attrs
    from automedbench.evaluator import evaluate
    from automedbench.freeze import freeze
    from automedbench.plugins import registry
    from automedbench.track import StagedData

    track, task = registry().task(TASK)
    task = attrs.evolve(task, case_count=cases)
    ids = sorted(p.name for p in (root / "task" / "public").iterdir())
    staged = StagedData(root / "task", root / "task" / "public", root / "task" / "private", ids)
    manifest = freeze(root / "submission", root / f"frozen-{os.getpid()}", submitted=True)
    started = time.perf_counter()
    result = evaluate(track, task, staged, root / f"frozen-{os.getpid()}", manifest)
    elapsed = time.perf_counter() - started
    assert result.valid_cases == cases, result.cases[:3]
    print(f"task {result.metric.partial:.6f}", file=sys.stderr)
    return elapsed


def bare(root: Path, cases: int) -> float:
    from skimage.metrics import structural_similarity

    def ssim(a: np.ndarray, b: np.ndarray, lo: float, hi: float) -> float:
        a, b = np.clip(a.astype(np.float64), lo, hi), np.clip(b.astype(np.float64), lo, hi)
        return structural_similarity(a, b, data_range=hi - lo, gaussian_weights=True, sigma=1.5,
                                     use_sample_covariance=False)

    ids = sorted(p.name for p in (root / "task" / "public").iterdir())
    started = time.perf_counter()
    values = []
    for case in ids:
        ref = np.load(root / "task" / "private" / case / "reference.npy")
        pred = np.load(root / "submission" / case / "enhanced.npy")
        r, p = np.clip(ref.astype(np.float64), -1024, 3071), np.clip(pred.astype(np.float64), -1024, 3071)
        mse = float(np.mean((r - p) ** 2))
        values.append((ssim(ref, pred, -1024, 3071), ssim(ref, pred, -160, 240), 10 * np.log10(4095 ** 2 / mse)))
    elapsed = time.perf_counter() - started
    print(f"task {np.mean([v[0] for v in values]):.6f}", file=sys.stderr)
    return elapsed


def child(mode: str, root: Path, cases: int) -> tuple[float, float, str]:
    """(seconds inside the measured section, peak RSS in MB, task value printed) of one child process."""
    proc = subprocess.Popen([sys.executable, __file__, "--child", mode, "--root", str(root), "--cases", str(cases)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    out, err = proc.stdout.read(), proc.stderr.read()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{mode} child failed: {err.strip().splitlines()[-1:]}")
    return float(out.strip()), usage.ru_maxrss / 1024, err.strip().splitlines()[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100, help="LDCT cases to score [default: 100]")
    parser.add_argument("--repeats", type=int, default=3, help="alternating runs of each side [default: 3]")
    parser.add_argument("--child", choices=["harness", "skimage"], help=argparse.SUPPRESS)
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(harness(args.root, args.cases) if args.child == "harness" else bare(args.root, args.cases))
        return 0
    with tempfile.TemporaryDirectory(prefix="amb-bench-enh-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        prepare(root, args.cases)
        print(f"staged {args.cases} LDCT cases + a Gaussian submission in {time.perf_counter() - t0:.1f} s")
        runs: dict[str, list[tuple[float, float, str]]] = {"harness": [], "skimage": []}
        for _ in range(args.repeats):
            for mode in runs:
                runs[mode].append(child(mode, root, args.cases))
        for mode, rows in runs.items():
            times, peaks = [r[0] for r in rows], [r[1] for r in rows]
            print(f"{mode:8s} wall median {statistics.median(times):.2f} s "
                  f"(min {min(times):.2f}, max {max(times):.2f}); "
                  f"peak RSS median {statistics.median(peaks):.0f} MB; {rows[0][2]}")
        ratios = [h[0] / s[0] for h, s in zip(runs["harness"], runs["skimage"], strict=True)]
        print(f"harness / skimage time ratio, pair by pair: median {statistics.median(ratios):.2f} "
              f"(min {min(ratios):.2f}, max {max(ratios):.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
