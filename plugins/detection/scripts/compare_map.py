"""How mAP@0.5 differs between protocols and libraries on the same generated predictions.

Rows: this track's implementation (COCO 101-point, greedy score-ordered matching); pycocotools
COCOeval (iouThrs=[0.5], maxDets raised, one area range); VOC all-point (area under the precision
envelope) and VOC2007 11-point on the same matching; torchmetrics `MeanAveragePrecision`
(iou_thresholds=[0.5], its pycocotools backend; with its own recall points, and with numpy's);
ultralytics `ap_per_class` with true positives from its own `DetectionValidator.match_predictions`. A
library that is not installed is reported as "not measured" instead of failing.

torchmetrics' detection mAP and ultralytics need torchvision, which does not load beside the CPU
torch 2.13 of the test environment, so run the full table in its own environment:

    python3 -m venv /work/venv-tv
    /work/venv-tv/bin/pip install torch==2.14.1 torchvision==0.29.1
    /work/venv-tv/bin/pip install ultralytics torchmetrics pycocotools
    /work/venv-tv/bin/pip install --no-deps -e . -e plugins/detection      # the harness and this track
    YOLO_CONFIG_DIR=/tmp/yolo YOLO_OFFLINE=1 /work/venv-tv/bin/python plugins/detection/scripts/compare_map.py

In the test environment (`.venv/bin/python plugins/detection/scripts/compare_map.py`) the first four rows
are measured. Sets: 40 images of 512x512, 3 classes, about 70 references and 100 predictions each
(jittered hits, 25 % lower-scored duplicates, 10 % class flips, random false positives).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable from a checkout without installing

from automedbench_detection.average_precision import Boxes, mean_average_precision
from automedbench_detection.comparison import coco_per_class, generated_set, voc_per_class

N_IMG, N_CLS = 40, 3


def ours(det: Boxes, gt: Boxes) -> np.ndarray:
    return mean_average_precision(det, gt, N_CLS).per_class


def pycocotools(det: Boxes, gt: Boxes) -> np.ndarray:
    return coco_per_class(det, gt, N_IMG, N_CLS)


def torchmetrics_map(det: Boxes, gt: Boxes, numpy_recall_points: bool = False) -> np.ndarray:
    """torchmetrics with its defaults (maxDets 1/10/100: these sets have at most ~15 boxes per image), or
    with the recall points of np.linspace instead of its float32 torch.linspace."""
    import torch
    from torchmetrics.detection import MeanAveragePrecision

    extra = {"rec_thresholds": np.linspace(0.0, 1.0, 101).tolist()} if numpy_recall_points else {}
    metric = MeanAveragePrecision(iou_thresholds=[0.5], class_metrics=True, backend="pycocotools", **extra)
    preds, target = [], []
    for i in range(N_IMG):
        d, g = det.image == i, gt.image == i
        preds.append({"boxes": torch.tensor(det.box[d], dtype=torch.float64), "scores": torch.tensor(det.score[d]),
                      "labels": torch.tensor(det.cls[d])})
        target.append({"boxes": torch.tensor(gt.box[g], dtype=torch.float64), "labels": torch.tensor(gt.cls[g])})
    metric.update(preds, target)
    out = metric.compute()
    per = np.full(N_CLS, np.nan)
    for label, value in zip(out["classes"].tolist(), out["map_per_class"].tolist(), strict=True):
        per[int(label)] = value if value >= 0 else np.nan
    return per


def ultralytics_ap(det: Boxes, gt: Boxes) -> np.ndarray:
    import torch
    from ultralytics.models.yolo.detect import DetectionValidator
    from ultralytics.utils.metrics import ap_per_class, box_iou

    validator = DetectionValidator()
    validator.iouv = torch.tensor([0.5])
    tps, confs, classes = [], [], []
    for i in range(N_IMG):
        d = np.flatnonzero(det.image == i)
        d = d[np.argsort(-det.score[d], kind="stable")]  # its matcher expects score order
        g = gt.image == i
        if not len(d):
            continue
        if g.any():
            iou = box_iou(torch.tensor(gt.box[g]), torch.tensor(det.box[d]))
            tp = validator.match_predictions(torch.tensor(det.cls[d]), torch.tensor(gt.cls[g]), iou)
            tp = np.asarray(tp).reshape(len(d), -1)[:, :1]
        else:
            tp = np.zeros((len(d), 1), dtype=bool)
        tps.append(tp)
        confs.append(det.score[d])
        classes.append(det.cls[d])
    result = ap_per_class(np.concatenate(tps), np.concatenate(confs), np.concatenate(classes), gt.cls)
    ap, unique = result[5], result[6]
    per = np.full(N_CLS, np.nan)
    for k, c in enumerate(unique):
        per[int(c)] = float(ap[k, 0])
    return per


ROWS: list[tuple[str, Callable[[Boxes, Boxes], np.ndarray]]] = [
    ("this track (COCO 101-point, numpy)", ours),
    ("pycocotools COCOeval, iouThrs=[0.5]", pycocotools),
    ("VOC all-point (same matching)", lambda d, g: voc_per_class(d, g, N_CLS, None)),
    ("VOC2007 11-point (same matching)", lambda d, g: voc_per_class(d, g, N_CLS, 11)),
    ("torchmetrics MeanAveragePrecision, defaults (pycocotools backend)", torchmetrics_map),
    ("torchmetrics, recall points from np.linspace", lambda d, g: torchmetrics_map(d, g, True)),
    ("ultralytics ap_per_class + match_predictions", ultralytics_ap),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=4, help="generated sets (seeds 0..N-1)")
    args = parser.parse_args()
    sets = [generated_set(seed, n_img=N_IMG, n_cls=N_CLS) for seed in range(args.sets)]
    header = "| protocol / library | " + " | ".join(f"set {k}" for k in range(args.sets)) + " | per class, set 0 |"
    print(header)
    print("|---|" + "---:|" * args.sets + "---|")
    for name, fn in ROWS:
        try:
            values = [fn(det, gt) for det, gt in sets]
        except ImportError as exc:
            print(f"| {name} | " + " | ".join("not measured" for _ in sets) + f" | ({exc.name} not installed) |")
            continue
        means = " | ".join(f"{np.nanmean(v):.4f}" for v in values)
        print(f"| {name} | {means} | {' / '.join(f'{x:.4f}' for x in values[0])} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
