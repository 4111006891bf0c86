"""mAP@0.5 speed: the detection track's numpy implementation against pycocotools, same data, same run.

10 000 images x 50 reference boxes x 50 detections (3 classes; detections are jittered references with
10 % class flips and random scores), by default. pycocotools gets iouThrs=[0.5], one area range and
maxDets raised to 10**6 (no cap, as ours); its COCO index building, evaluate() and accumulate() are all
timed, its loading of the result list too. Both results are compared per class.

Run: `.venv/bin/python benchmarks/bench_detection.py [--images 10000] [--boxes 50] [--repeats 3] [--no-coco]`.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from automedbench_detection.average_precision import Boxes, mean_average_precision


def dataset(images: int, per_image: int, classes: int, seed: int = 0) -> tuple[Boxes, Boxes]:
    rng = np.random.default_rng(seed)
    n = images * per_image
    image = np.repeat(np.arange(images, dtype=np.int64), per_image)
    wh = rng.uniform(10, 80, (n, 2))
    xy = rng.uniform(0, 560, (n, 2))
    ref = np.c_[xy, xy + wh]
    gt = Boxes(image, rng.integers(0, classes, n), ref)
    flips = rng.random(n) < 0.1
    moved = ref + rng.normal(0, 4, (n, 4))
    x1, x2 = np.minimum(moved[:, 0], moved[:, 2]), np.maximum(moved[:, 0], moved[:, 2]) + 1.0
    y1, y2 = np.minimum(moved[:, 1], moved[:, 3]), np.maximum(moved[:, 1], moved[:, 3]) + 1.0
    det = Boxes(image.copy(), np.where(flips, rng.integers(0, classes, n), gt.cls), np.c_[x1, y1, x2, y2],
                rng.random(n))
    return det, gt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=10_000)
    parser.add_argument("--boxes", type=int, default=50)
    parser.add_argument("--classes", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-coco", action="store_true", help="skip pycocotools (minutes at the default size)")
    args = parser.parse_args()
    det, gt = dataset(args.images, args.boxes, args.classes)
    times, cpu = [], []
    for _ in range(args.repeats):
        started, started_cpu = time.perf_counter(), time.process_time()
        ours = mean_average_precision(det, gt, args.classes)
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    print(f"{args.images} images x {args.boxes} boxes ({len(det)} detections, {len(gt)} references); "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"numpy (ours): wall best {min(times):.3f} s, median {float(np.median(times)):.3f} s; CPU best "
          f"{min(cpu):.3f} s (of {args.repeats}); mAP {ours.mean:.6f}")
    if args.no_coco:
        return
    from automedbench_detection.average_precision import RECALL_POINTS
    from automedbench_detection.comparison import coco_per_class

    started, started_cpu = time.perf_counter(), time.process_time()
    oracle = coco_per_class(det, gt, args.images, args.classes, recall_points=RECALL_POINTS)
    coco_s, coco_cpu = time.perf_counter() - started, time.process_time() - started_cpu
    diff = float(np.nanmax(np.abs(oracle - ours.per_class)))
    print(f"pycocotools: wall {coco_s:.1f} s, CPU {coco_cpu:.1f} s; mAP {float(np.nanmean(oracle)):.6f}; "
          f"max per-class difference {diff:.2e}")
    print(f"speed-up: wall {coco_s / min(times):.0f}x, CPU {coco_cpu / min(cpu):.0f}x (pycocotools / best numpy)")


if __name__ == "__main__":
    main()
