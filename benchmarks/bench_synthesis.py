"""Synthesis evaluator against a bare scikit-image loop on the CT-SR demo: wall time per pass, same process.

    .venv/bin/python benchmarks/bench_synthesis.py [--cases 6] [--repeats 3]

Stages `synthesis/demo` (generated 128x128x65 HU phantoms) into a temporary data root, writes the cubic
baseline as the submission, then alternates per repeat:
- harness: `SynthesisEvaluation` (the checker's no-follow, bounded NIfTI reader with the shape/affine
  check, the target read, axial SSIM, MAE/RMSE/PSNR, the input-copy comparison, the completion fold);
- skimage: `nibabel.load` of both files and `skimage.metrics.structural_similarity` per axial plane on the
  clipped volumes, nothing else.
Prints medians and the ratio pair by pair; both sides must give the same mean SSIM.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

TASK = "synthesis/demo"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import attrs
    import nibabel as nib
    from automedbench_synthesis.baselines import write_baseline
    from automedbench_synthesis.data.demo import stage_demo
    from automedbench_synthesis.metric import SynthesisEvaluation
    from automedbench_synthesis.track import SynthesisTrack
    from skimage.metrics import structural_similarity

    task = next(t for t in SynthesisTrack().tasks() if t.id == TASK)
    task = attrs.evolve(task, case_count=args.cases)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        staged = stage_demo(task, root / "task")
        write_baseline(task, "cubic", staged, root / "sub")

        def harness() -> float:
            evaluation = SynthesisEvaluation(task, staged)
            scores = [evaluation.score_case(c, root / "sub" / c) for c in staged.case_ids]
            return evaluation.aggregate(scores, staged.case_ids).components["ssim_mean_valid"]

        def bare() -> float:
            values = []
            for case in staged.case_ids:
                ref = np.clip(np.asarray(nib.load(str(staged.private / case / "target.nii.gz")).dataobj, float),
                              -1024, 3071)
                out = np.clip(np.asarray(nib.load(str(root / "sub" / case / "sct.nii.gz")).dataobj, float),
                              -1024, 3071)
                values.append(np.mean([structural_similarity(ref[:, :, k], out[:, :, k], data_range=4095)
                                       for k in range(ref.shape[2])]))
            return float(np.mean(values))

        times: dict[str, list[float]] = {"harness": [], "skimage": []}
        results = {}
        for _ in range(args.repeats):
            for name, fn in (("harness", harness), ("skimage", bare)):
                started = time.perf_counter()
                results[name] = fn()
                times[name].append(time.perf_counter() - started)
        ratios = [h / s for h, s in zip(times["harness"], times["skimage"], strict=True)]
        for name, values in times.items():
            print(f"{name:8s} median {statistics.median(values):.2f} s (min {min(values):.2f}, max {max(values):.2f})"
                  f"  mean SSIM {results[name]:.6f}")
        print(f"ratio harness/skimage median {statistics.median(ratios):.2f} (min {min(ratios):.2f}, "
              f"max {max(ratios):.2f})")
        assert abs(results["harness"] - results["skimage"]) < 1e-9


if __name__ == "__main__":
    main()
