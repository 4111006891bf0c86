"""Trivial and classical baselines, what each scores, and `python -m` to measure them on a staging.

CT-SR baselines work from the degraded input alone: `identity` submits it unchanged, `trilinear`
re-interpolates its kept slices linearly along z (the degradation's own inverse: equal to the identity),
`nearest` repeats the nearest kept slice, `cubic` passes a natural cubic spline through the kept slices,
`constant` fills the volume with the input's mean HU. MRI -> CT has no interpolation baseline: there
`identity` copies the MR (not HU), `constant` is water (0 HU) inside the body mask and air outside, and
`nearest`, `trilinear` and `cubic` map the MR linearly onto [-1000, 100] HU inside the mask.
    python -m automedbench_synthesis.baselines synthesis/demo [--data-root PATH]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from automedbench.api import StagedData, TaskSpec

from .data import degrade
from .data.store import TARGET, load_private, read_facts, save_nifti

BASELINES: dict[str, str] = {
    "perfect": "the target CTs themselves",
    "empty": "no output at all",
    "identity": "the input unchanged (CT-SR: the degraded CT; MRI->CT: the MR, not HU)",
    "constant": "CT-SR: the input's mean HU everywhere; MRI->CT: 0 HU inside the body mask, -1000 outside",
    "nearest": "CT-SR: the nearest kept slice repeated; MRI->CT: the MR mapped linearly to [-1000, 100] HU in the mask",
    "trilinear": "CT-SR: linear interpolation of the kept slices along z (= the input); MRI->CT: as nearest",
    "cubic": "CT-SR: a natural cubic spline through the kept slices along z; MRI->CT: as nearest",
}
# The interpolations that restore no detail (measured by `measure`), and with `empty` the trivial baselines
# that must rate below B (`Track.trivial_baselines`, checked by validate-task and the core's test).
INTERPOLATIONS = ("identity", "constant", "nearest", "trilinear", "cubic")
TRIVIAL: dict[str, str] = {name: BASELINES[name] for name in ("empty", *INTERPOLATIONS)}


def _load(path: Path) -> tuple[np.ndarray, np.ndarray]:
    import nibabel as nib

    image = nib.load(str(path))
    return np.asarray(image.dataobj, dtype=np.float32), np.asarray(image.affine)


def restore(task: TaskSpec, name: str, public_case: Path) -> tuple[np.ndarray, np.ndarray]:
    """(volume, affine) of baseline `name` for one case, from the public inputs only."""
    if task.params["kind"] == "ctsr":
        low, affine = _load(public_case / task.input_files[0])
        scale = int(task.params["scale"])
        ops = {"identity": lambda v: v, "trilinear": lambda v: degrade.z_linear(v, scale),
               "nearest": lambda v: degrade.z_nearest(v, scale), "cubic": lambda v: degrade.z_cubic(v, scale),
               "constant": lambda v: np.full(v.shape, float(v.mean()), dtype=np.float32)}
        return ops[name](low).astype(np.float32), affine
    mr, affine = _load(public_case / "mr.nii.gz")
    mask = _load(public_case / "mask.nii.gz")[0] > 0
    if name == "identity":
        return mr, affine
    if name == "constant":
        return np.where(mask, 0.0, -1000.0).astype(np.float32), affine
    inside = mr[mask] if mask.any() else mr.ravel()
    lo, hi = np.percentile(inside, [1, 99])
    scaled = -1000.0 + 1100.0 * np.clip((mr - lo) / max(hi - lo, 1e-6), 0, 1)
    return np.where(mask, scaled, -1000.0).astype(np.float32), affine


def write_baseline(task: TaskSpec, name: str, staged: StagedData, dest: Path) -> None:
    """The baseline's outputs for every case, in the submission layout."""
    if name not in BASELINES:
        from automedbench.api import UserError, did_you_mean

        raise UserError(f"unknown baseline {name!r}{did_you_mean(name, list(BASELINES))}")
    dest.mkdir(parents=True, exist_ok=True)
    if name == "empty":
        return
    for case_id in staged.case_ids:
        if name == "perfect":
            volume, affine = _load(staged.private / case_id / TARGET)
        else:
            volume, affine = restore(task, name, staged.public / case_id)
        save_nifti(dest / case_id / "sct.nii.gz", volume, affine)


def measure(task: TaskSpec, staged: StagedData, names: tuple[str, ...] = INTERPOLATIONS) -> dict[str, dict[str, float]]:
    """Mean SSIM, PSNR and MAE of each baseline over the staged cases (in process: targets are read directly)."""
    from .metric import score_pair

    table: dict[str, dict[str, float]] = {}
    for name in names:
        rows = []
        for case_id in staged.case_ids:
            target, mask, _ = load_private(staged.private, case_id)
            rows.append(score_pair(target, restore(task, name, staged.public / case_id)[0], mask))
        table[name] = {key: float(np.mean([r[key] for r in rows if r[key] is not None] or [np.nan]))
                       for key in ("ssim", "psnr", "mae_hu")}
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m automedbench_synthesis.baselines",
                                     description="Measure the trivial baselines on a staged synthesis task and "
                                                 "print the input-copy score the rating's B band starts above.")
    parser.add_argument("task", help="task id, e.g. synthesis/demo or synthesis/msd-pancreas-ctsr")
    parser.add_argument("--data-root", type=Path, default=None, help="data root [default: AUTOMEDBENCH_DATA]")
    args = parser.parse_args(argv)
    from automedbench.api import UserError, stage_task

    from .track import SynthesisTrack

    try:
        task = SynthesisTrack().task(args.task)
        staged = stage_task(task.id, args.data_root)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for name, row in sorted(measure(task, staged).items(), key=lambda kv: kv[1]["ssim"]):
        print(f"{name:10s} SSIM {row['ssim']:.4f}  PSNR {row['psnr']:.2f} dB  MAE {row['mae_hu']:.1f} HU")
    identity = [f["ssim_identity"] for f in read_facts(staged.private).values()]
    print(f"input copy (staged): {float(np.mean(identity)):.4f}; B needs at least "
          f"{float(np.mean(identity)) + float(task.params['input_margin']['okay']):.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
