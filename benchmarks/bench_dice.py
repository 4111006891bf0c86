"""Dice speed on a KiTS-sized pair, against MONAI's DiceMetric and a memory-bandwidth reference.

A KiTS19 CT is about 512 x 512 x 600 voxels; the label map has 3 values (0 background, 1 kidney,
2 tumour). The bandwidth reference is one `np.add` over both arrays into a third (the least any
two-array pass can cost) and one `np.copyto`. MONAI's DiceMetric gets one-hot tensors prepared
beforehand (its required input); the one-hot conversion is timed separately.

Two label maps: "realistic" (two kidney-sized ellipsoids with a tumour, prediction shifted by
3 voxels: most of the volume is background) and "dense" (random labels in every voxel, the worst
case for chunk skipping). Best of `--repeats` runs each.

`--cohort N` also writes N KiTS-sized cases (CT, references, a shifted prediction) as NIfTI and
scores the first 1 and then all N with the evaluator's own loop in a fresh process each, reporting
wall time and the process's peak RSS: streaming case by case, the peak should not grow with N.

Run: `.venv/bin/python benchmarks/bench_dice.py [--repeats 5] [--no-monai] [--shape 512 512 600] [--cohort 3]`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from automedbench_segmentation.dice import binary_dice, confusion, dice, dice_from_confusion

LABELS = (1, 2)


def best_of(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def ellipsoid(shape: tuple[int, ...], centre, radii) -> tuple[slice, ...] | np.ndarray:
    box = tuple(slice(max(0, int(c - r)), min(n, int(c + r) + 1)) for c, r, n in zip(centre, radii, shape, strict=True))
    grids = np.ogrid[box]
    inside = sum(((gr - c) / r) ** 2 for gr, c, r in zip(grids, centre, radii, strict=True)) <= 1.0
    return box, inside


def realistic(shape: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    ref = np.full(shape, 0, dtype=np.uint8)  # np.full writes every page (np.zeros would map the zero page)
    x, y, z = shape
    for side in (-1, 1):
        box, inside = ellipsoid(shape, (x / 2 + side * x / 6, y / 2, z / 2), (x / 14, y / 10, z / 6))
        ref[box][inside] = 1
    box, inside = ellipsoid(shape, (x / 2 + x / 6, y / 2, z / 2 + z / 12), (x / 40, x / 40, z / 30))
    ref[box][inside] = 2
    pred = np.roll(ref, 3, axis=0)
    return pred, ref


def dense(shape: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    ref = rng.integers(0, 3, size=shape, dtype=np.uint8)
    pred = np.where(rng.random(shape, dtype=np.float32) < 0.8, ref, np.uint8(0)).astype(np.uint8)
    return pred, ref


def monai_dice(pred: np.ndarray, ref: np.ndarray, repeats: int) -> tuple[float, float, list[float]]:
    import torch
    from monai.metrics import DiceMetric

    def onehot(a: np.ndarray):
        return torch.from_numpy(np.stack([a == k for k in range(3)])[None])

    t_prep, (p1, g1) = best_of(lambda: (onehot(pred), onehot(ref)), 1)
    metric = DiceMetric(include_background=False, reduction="none", ignore_empty=False)
    t_metric, out = best_of(lambda: metric(p1, g1), repeats)
    return t_prep, t_metric, [float(v) for v in out[0]]


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--shape", type=int, nargs=3, default=(512, 512, 600))
    parser.add_argument("--no-monai", action="store_true", help="skip MONAI (it needs ~2 GB for one-hot tensors)")
    parser.add_argument("--cohort", type=int, default=0, metavar="N", help="also score N KiTS-sized cases (peak RSS)")
    parser.add_argument("--cohort-only", action="store_true", help="skip the Dice comparison")
    parser.add_argument("--checker", action="store_true", help="also time the output checker's value scan")
    args = parser.parse_args()
    shape = tuple(args.shape)
    print(f"shape {shape} uint8, labels {LABELS}, best of {args.repeats}; numpy {np.__version__}")
    if not args.cohort_only:
        for name, make in (("realistic", realistic), ("dense", dense)):
            bench_pair(name, *make(shape), args.repeats, not args.no_monai)
    if args.checker:
        bench_checker(*realistic(shape), args.repeats)
    if args.cohort:
        bench_cohort(shape, args.cohort)


def bench_checker(pred: np.ndarray, ref: np.ndarray, repeats: int) -> None:
    """The checker's value scan on a KiTS-sized label map, uint8 and float32, against np.unique."""
    from automedbench_segmentation.contract import value_problems

    out = np.full(pred.shape, 0, dtype=np.uint8)
    t_add, _ = best_of(lambda: np.add(pred, ref, out=out), repeats)
    as_float = pred.astype(np.float32)
    print(f"\n[checker] value scan of one {pred.shape} label map (allowed {{0, 1, 2}})")
    for name, data, allowed in (("uint8", pred, {0, 1, 2}), ("float32", as_float, {0, 1, 2}),
                                ("uint8, gappy set {0,1,2,5}", pred, {0, 1, 2, 5})):
        t, problems = best_of(lambda: value_problems("m", data, allowed), repeats)  # noqa: B023
        assert problems == [], problems
        print(f"  value_problems {name:26s} {t * 1e3:8.1f} ms  = {t / t_add:.1f}x np.add")
    t_unique, _ = best_of(lambda: np.unique(pred), 1)
    print(f"  np.unique (the old label check) {t_unique * 1e3:8.1f} ms")


SCORE_CHILD = """
import json, sys, time
from pathlib import Path
import attrs
from automedbench.evaluator import evaluate
from automedbench.plugins import registry
from automedbench.records import SubmissionManifest
from automedbench.track import StagedData
root, n, surface = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
track, task = registry().task("segmentation/kidney")
task = attrs.evolve(task, case_count=n, params={**task.params, "surface_metrics": surface})
ids = sorted(p.name for p in (root / "public").iterdir())[:n]
t = time.perf_counter()
ev = evaluate(track, task, StagedData(root, root / "public", root / "private", ids), root / "sub", SubmissionManifest())
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over fork+exec, so it would report the parent's size.
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"s": time.perf_counter() - t, "rss_mb": hwm / 1024,
                  "valid": ev.valid_cases, "task": ev.metric.strict}))
"""


def bench_cohort(shape: tuple[int, int, int], n: int) -> None:
    from automedbench_segmentation import io

    affine = np.diag([0.8, 0.8, 1.0, 1.0])
    with tempfile.TemporaryDirectory(prefix="amb-bench-") as tmp:
        root = Path(tmp)
        t = time.perf_counter()
        pred, ref = realistic(shape)
        ct = np.where(ref > 0, np.int16(150), np.int16(-1000)).astype(np.int16)
        for i in range(n):
            case = f"kidney_{i + 1:03d}"
            shifted = np.roll(ref, i, axis=1)  # a slightly different case each time
            io.save(root / "public" / case / "ct.nii.gz", ct, affine)
            for name, volume in (("organ", shifted > 0), ("lesion", shifted == 2)):
                io.save(root / "private" / case / f"{name}.nii.gz", volume.astype(np.uint8), affine)
            moved = np.roll(pred, i, axis=1)
            for name, volume in (("organ", moved > 0), ("lesion", moved == 2)):
                io.save(root / "sub" / case / f"{name}.nii.gz", volume.astype(np.uint8), affine)
        io.write_case_facts(root / "private", {f"kidney_{i + 1:03d}": {"lesion_present": True} for i in range(n)})
        del pred, ref, ct
        print(f"\n[cohort] {n} cases of {shape} written in {time.perf_counter() - t:.0f} s; "
              "scoring in a fresh process (evaluator loop, check + score per case)")
        for surface in ("0", "1"):
            for count in (1, n):
                out = subprocess.run([sys.executable, "-c", SCORE_CHILD, str(root), str(count), surface],
                                     capture_output=True, text=True, check=True)
                r = json.loads(out.stdout.strip().splitlines()[-1])
                label = "Dice + HD95/surface Dice (MONAI)" if surface == "1" else "Dice only"
                print(f"  {label:34s} {count} case(s): {r['s']:6.1f} s  ({r['s'] / count:.1f} s/case)  "
                      f"peak RSS {r['rss_mb']:6.0f} MB  valid {r['valid']}  task {r['task']:.3f}")


def bench_pair(name: str, pred: np.ndarray, ref: np.ndarray, repeats: int, with_monai: bool) -> None:
    out = np.full(pred.shape, 0, dtype=np.uint8)
    t_add, _ = best_of(lambda: np.add(pred, ref, out=out), repeats)
    t_copy, _ = best_of(lambda: np.copyto(out, ref), repeats)
    t_ours, ours = best_of(lambda: dice(pred, ref, LABELS), repeats)
    t_bin, _ = best_of(lambda: binary_dice(pred, ref), repeats)
    t_hist, hist = best_of(lambda: dice_from_confusion(confusion(pred, ref, 3), LABELS), 1)
    assert all(abs(ours[k] - hist[k]) < 1e-12 for k in LABELS), (ours, hist)
    fg = float(np.count_nonzero(ref)) / ref.size
    gbs = 3 * pred.nbytes / t_add / 1e9
    print(f"\n[{name}] foreground {fg:.1%} of voxels; dice {ours}")
    print(f"  np.add (read 2, write 1)   {t_add * 1e3:8.1f} ms  ({gbs:.1f} GB/s)")
    print(f"  np.copyto (read 1, write 1){t_copy * 1e3:8.1f} ms")
    print(f"  ours, 2 labels             {t_ours * 1e3:8.1f} ms  = {t_ours / t_add:.2f}x np.add")
    print(f"  ours, binary (nonzero)     {t_bin * 1e3:8.1f} ms  = {t_bin / t_add:.2f}x np.add")
    print(f"  bincount joint histogram   {t_hist * 1e3:8.1f} ms  = {t_hist / t_ours:.1f}x ours")
    if with_monai:
        t_prep, t_metric, theirs = monai_dice(pred, ref, max(1, repeats // 2))
        assert np.allclose([ours[k] for k in LABELS], theirs, atol=1e-6), (ours, theirs)
        print(f"  MONAI DiceMetric           {t_metric * 1e3:8.1f} ms  = {t_metric / t_ours:.1f}x ours "
              f"(+ one-hot prep {t_prep * 1e3:.0f} ms, torch {torch_threads()} threads); values agree")

if __name__ == "__main__":
    main()
