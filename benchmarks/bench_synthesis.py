"""Synthesis evaluator against a bare scikit-image loop on the CT-SR demo: wall time per pass, same process.

    .venv/bin/python benchmarks/bench_synthesis.py [--cases 6] [--repeats 3]

Stages `synthesis/demo` (generated 128x128x65 HU phantoms) into a temporary data root, writes the cubic
baseline as the submission, then alternates per repeat:
- harness: `SynthesisEvaluation` (the checker's no-follow, bounded NIfTI reader with the shape/affine
  check, the target read, axial SSIM, MAE/RMSE/PSNR, the input-copy comparison, the completion fold);
- skimage: `nibabel.load` of both files and `skimage.metrics.structural_similarity` per axial plane on the
  clipped volumes, nothing else.
Prints medians and the ratio pair by pair; both sides must give the same mean SSIM.

Then the error metrics side by side in the same process (`--errors-only`: just these), on the same in-memory
volumes (the target as the evaluator caches it, the output as the checker decodes it: float32, Fortran order):
- ours: `metric.errors` (MAE, RMSE, PSNR from one float64 difference image);
- libraries: scikit-learn's `mean_absolute_error` and `root_mean_squared_error` and scikit-image's
  `peak_signal_noise_ratio` on the clipped volumes, given float64 copies made beforehand (the conversion not
  timed) and, in a second column, with the conversion timed.
CPU time (`time.process_time`) per pass over every case, alternating, medians and the ratio pair by pair; the
values are printed to 12 significant digits and must be equal.

Then the axial SSIM alone (`--ssim-only`: just this), one-off as a cold evaluator computes it (`AxialSSIM`
preparing the reference's terms in the call, every plane filtered) against scikit-image's
`structural_similarity` per plane on the clipped float64 volumes: CPU time per pass over every case,
alternating, medians and the ratio pair by pair; every case's value must be equal (==).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

TASK = "synthesis/demo"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--errors-only", action="store_true", help="only the error-metric comparison")
    parser.add_argument("--ssim-only", action="store_true", help="only the one-off axial SSIM comparison")
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
        if args.errors_only:
            compare_errors(staged, root / "sub", max(args.repeats, 5))
            return
        if args.ssim_only:
            compare_ssim(staged, root / "sub", max(args.repeats, 5))
            return

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
        compare_errors(staged, root / "sub", max(args.repeats, 5))


def alternate(runs: dict[str, Callable[[], Any]], repeats: int, title: str) -> dict[str, Any]:
    """Each run's CPU time over `repeats` alternating passes, printed as medians and the ratio of the first run
    ("ours") to each, pair by pair; each run's last value."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    values = {}
    for _ in range(repeats):
        for name, fn in runs.items():
            started = time.process_time()
            values[name] = fn()
            times[name].append(time.process_time() - started)
    print(f"{title}, CPU s per pass (median of {repeats}):")
    width = max(len(name) for name in runs)
    for name, spent in times.items():
        ratios = [o / t for o, t in zip(times["ours"], spent, strict=True)]
        print(f"  {name:{width}s} {statistics.median(spent):.4f} s  (ours / this, pair by pair: median "
              f"{statistics.median(ratios):.2f}, min {min(ratios):.2f}, max {max(ratios):.2f})")
    return values


def compare_errors(staged, sub: Path, repeats: int) -> None:
    """MAE/RMSE/PSNR: ours against scikit-learn + scikit-image on the same volumes, CPU time, same process."""
    from automedbench_synthesis import contract, refcache
    from automedbench_synthesis.metric import HU_HI, HU_LO, errors
    from skimage.metrics import peak_signal_noise_ratio
    from sklearn.metrics import mean_absolute_error, root_mean_squared_error

    pairs = []
    for case in staged.case_ids:
        ref = refcache.reference(staged.private, case, HU_LO, HU_HI, cache=False)
        pred, _ = contract.read_volume(sub, case, contract.OUTPUT, ref.target.shape, ref.affine)
        pairs.append((ref, pred))
    as64 = [(np.asarray(r.target, dtype=np.float64).ravel(), np.asarray(p, dtype=np.float64).ravel())
            for r, p in pairs]

    def ours() -> list[tuple[float, ...]]:
        out = [errors(r.target, p, r.mask, (r.target_min, r.target_max)) for r, p in pairs]
        return [(e["mae_hu"], e["rmse_hu"], e["psnr"]) for e in out]

    def libraries(flat: list[tuple[np.ndarray, np.ndarray]]) -> list[tuple[float, ...]]:
        return [(mean_absolute_error(t, p), root_mean_squared_error(t, p),
                 peak_signal_noise_ratio(np.clip(t, HU_LO, HU_HI), np.clip(p, HU_LO, HU_HI), data_range=HU_HI - HU_LO))
                for t, p in flat]

    def converting() -> list[tuple[float, ...]]:
        return libraries([(np.asarray(r.target, dtype=np.float64).ravel(), np.asarray(p, dtype=np.float64).ravel())
                          for r, p in pairs])

    runs = {"ours": ours, "libraries": lambda: libraries(as64), "libraries + conversion": converting}
    values = alternate(runs, repeats, f"error metrics, {len(pairs)} cases of {pairs[0][1].shape}")
    print("  case | MAE (HU) ours / libraries | RMSE (HU) ours / libraries | PSNR (dB) ours / libraries")
    for case, a, b in zip(staged.case_ids, values["ours"], values["libraries"], strict=True):
        shown = [(f"{x:.12g}", f"{float(y):.12g}") for x, y in zip(a, b, strict=True)]
        print(f"  {case} | " + " | ".join(f"{x} / {y}" for x, y in shown))
        assert all(x == y for x, y in shown), (case, shown)


def compare_ssim(staged, sub: Path, repeats: int) -> None:
    """Axial SSIM of each case, one-off (`AxialSSIM`, nothing kept) against scikit-image per plane, CPU time."""
    from automedbench_synthesis import contract, refcache
    from automedbench_synthesis.axialssim import AxialSSIM
    from automedbench_synthesis.metric import HU_HI, HU_LO
    from skimage.metrics import structural_similarity

    pairs = []
    for case in staged.case_ids:
        ref = refcache.reference(staged.private, case, HU_LO, HU_HI, cache=False)
        pred, _ = contract.read_volume(sub, case, contract.OUTPUT, ref.target.shape, ref.affine)
        pairs.append((ref.target, pred))

    def ours() -> list[float]:
        return [AxialSSIM(target, None, HU_LO, HU_HI)(pred)["ssim"] for target, pred in pairs]

    def scikit_image() -> list[float]:
        values = []
        for target, pred in pairs:
            t, p = (np.clip(np.asarray(v, dtype=np.float64), HU_LO, HU_HI) for v in (target, pred))
            values.append(float(np.mean([structural_similarity(t[:, :, k], p[:, :, k], data_range=HU_HI - HU_LO)
                                         for k in range(t.shape[2])])))
        return values

    values = alternate({"ours": ours, "scikit-image": scikit_image}, repeats,
                       f"axial SSIM, one-off, {len(pairs)} cases of {pairs[0][1].shape}")
    assert values["ours"] == values["scikit-image"], values
    print(f"  every case's SSIM equal (==): {', '.join(f'{v:.12g}' for v in values['ours'])}")


if __name__ == "__main__":
    main()
