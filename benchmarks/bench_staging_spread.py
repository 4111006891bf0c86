"""What stays comparable across stagings: the spread of each track's baselines over ten stagings of one download.

Every staging draws its own secret (which items, their ids, the noise of simulated low-dose CT), so two
stagings of one download are two samples of the same task. The perfect baseline scores exactly 1.0 on every
staging (a conformance check); a method's score moves with the sample. This script stages one fixture download
per track (written in the dataset's layout by the track's tests, larger than the task's sample so that the
sample itself varies) ten times and scores each staging's baselines through the isolated evaluator: mean,
standard deviation, min and max of the Task value (partial) per baseline.

Run: `.venv/bin/python benchmarks/bench_staging_spread.py [--stagings 10] [--tracks enhancement,vqa] [--json F]`.
Figures: README.md, "Every hidden choice is the staging's" (the trust section).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import attrs
import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _tests(track: str) -> None:
    sys.path.insert(0, str(ROOT / "plugins" / track / "tests"))


def classification(src: Path) -> tuple[str, Path, dict]:
    _tests("classification")
    import classification_layouts as layouts

    return "classification/brain-tumour-mri", layouts.brain_tumour(src, per_class=40), {"case_count": 100}


def detection(src: Path) -> tuple[str, Path, dict]:
    _tests("detection")
    import detection_layouts as layouts

    return "detection/bccd", layouts.voc(src, count=40, split=36, varied=True), {"case_count": 24}


def enhancement(src: Path) -> tuple[str, Path, dict]:
    _tests("enhancement")
    import release_layouts as layouts

    layouts.write_lidc(src, 24)
    return "enhancement/lidc-idri-denoising", src, {"case_count": 16}


def _nifti(path: Path, volume: np.ndarray, affine: np.ndarray) -> None:
    import nibabel as nib

    path.parent.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(volume, affine), str(path))


def segmentation(src: Path) -> tuple[str, Path, dict]:
    """KiTS19's layout holding the demo's phantom abdomens (each its own anatomy): 30 cases, 20 staged."""
    from automedbench_segmentation.data import phantom

    for i in range(30):
        ct, organ, lesion = phantom.make_case(i, True, 7)
        case = src / "data" / f"case_{i:05d}"
        _nifti(case / "imaging.nii.gz", ct, phantom.affine())
        _nifti(case / "segmentation.nii.gz", (organ + lesion).astype(np.uint8), phantom.affine())
    return "segmentation/kidney", src, {"case_count": 20}


def synthesis(src: Path) -> tuple[str, Path, dict]:
    """MSD Task07's layout holding the demo's phantom abdomens in HU: 30 volumes (12 in imagesTs), 20 staged."""
    from automedbench_synthesis.data import phantom

    for i in range(30):
        split = "imagesTs" if i < 12 else "imagesTr"  # the 12 of imagesTs are tried first, then 8 of 18
        volume = phantom.abdomen((96, 96, 48), i).astype(np.int16)
        _nifti(src / "Task07_Pancreas" / split / f"pancreas_{i:03d}.nii.gz", volume, np.diag([0.8, 0.8, 2.5, 1.0]))
    return "synthesis/msd-pancreas-ctsr", src, {"case_count": 20}


def vqa(src: Path) -> tuple[str, Path, dict]:
    _tests("vqa")
    from test_vqa_release_sets import write_kvasir

    write_kvasir(src, 400)
    return "vqa/kvasir-vqa", src, {"params": {"sample": 200}}


def report_gen(src: Path) -> tuple[str, Path, dict]:
    _tests("report_gen")
    from test_report_gen_stagers import make_mimic

    make_mimic(src, 60)
    return "report_gen/mimic-cxr", src, {"params": {"sample": 40}}


TRACKS: dict[str, tuple[Callable[[Path], tuple[str, Path, dict]], tuple[str, ...]]] = {
    "classification": (classification, ("perfect", "label-prior", "majority-class")),
    "detection": (detection, ("perfect", "classical", "prior-boxes")),
    "enhancement": (enhancement, ("perfect", "identity", "gaussian", "tv", "nlm")),
    "segmentation": (segmentation, ("perfect", "constant")),
    "synthesis": (synthesis, ("perfect", "trilinear", "cubic")),
    "vqa": (vqa, ("perfect", "question-prior", "label-prior")),
    "report_gen": (report_gen, ("perfect", "nearest-template", "majority-template")),
}


def spread(track: str, stagings: int, work: Path) -> dict[str, dict[str, float]]:
    from automedbench.engine import EvaluateOptions, evaluate_folder
    from automedbench.plugins import registry
    from automedbench.staging import stage

    write, baselines = TRACKS[track]
    task_id, download, change = write(work / "download")
    reg = registry()
    source_track, spec = reg.task(task_id)
    if "params" in change:
        spec = attrs.evolve(spec, params={**spec.params, **change.pop("params")})
    spec = attrs.evolve(spec, **change)
    backend = "warm" if "warm" in reg.components["evaluator"] else "process"
    scores: dict[str, list[float]] = {name: [] for name in baselines}
    for k in range(stagings):
        root = work / f"root-{k}"
        stage(source_track, spec, root, download)
        for name in baselines:
            result = evaluate_folder(reg, EvaluateOptions(task=task_id, baseline=name, data_root=root,
                                                          work=work / f"eval-{k}-{name}", backend=backend))
            scores[name].append(float(result.task.partial) if result.task else float("nan"))
    return {name: {"mean": round(float(np.mean(v)), 4), "sd": round(float(np.std(v, ddof=1)), 4),
                   "min": round(float(np.min(v)), 4), "max": round(float(np.max(v)), 4), "task": task_id}
            for name, v in scores.items()}


def main(argv: list[str] | None = None) -> int:
    import os

    os.environ.setdefault("AUTOMEDBENCH_WARM_EVALUATOR", "1")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stagings", type=int, default=10)
    parser.add_argument("--tracks", default=",".join(TRACKS))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    found = {}
    for track in [t.strip() for t in args.tracks.split(",") if t.strip()]:
        started = time.process_time()
        with tempfile.TemporaryDirectory(prefix=f"amb-spread-{track}-") as tmp:
            found[track] = spread(track, args.stagings, Path(tmp))
        for name, row in found[track].items():
            print(f"{row['task']:34s} {name:18s} mean {row['mean']:.4f}  sd {row['sd']:.4f}  "
                  f"[{row['min']:.4f}, {row['max']:.4f}]")
        print(f"  ({time.process_time() - started:.0f} CPU-s in this process)", flush=True)
    if args.json:
        args.json.write_text(json.dumps(found, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
