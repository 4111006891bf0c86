"""The scripted reference agent's method: HU thresholds, connected components and hole filling.

This file is written into the agent's workspace and run there by the reference agent (it is agent
code, never imported by the evaluator). Usage: `python segment.py DATA_DIR OUT_DIR [CASE ...]`.
"""

import sys
from pathlib import Path

import nibabel as nib
import numpy as np
from scipy import ndimage

ORGAN_MIN, ORGAN_MAX = 110.0, 400.0
LESION_MIN, LESION_MAX = 50.0, 130.0


def largest_components(mask, count, min_voxels):
    labels, n = ndimage.label(mask)
    if n == 0:
        return mask
    sizes = ndimage.sum(mask, labels, range(1, n + 1))
    order = np.argsort(sizes)[::-1][:count]
    keep = [i + 1 for i in order if sizes[i] >= min_voxels]
    return np.isin(labels, keep)


def fill_slices(mask):
    out = np.zeros_like(mask)
    for z in range(mask.shape[2]):
        out[:, :, z] = ndimage.binary_fill_holes(mask[:, :, z])
    return out


def segment(ct):
    ct = ct.astype(np.float32)
    smooth = ndimage.gaussian_filter(ct, 1.0)
    kidneys = largest_components((smooth > ORGAN_MIN) & (smooth < ORGAN_MAX), 2, 500)
    organ = fill_slices(ndimage.binary_closing(kidneys, iterations=1))
    fine = ndimage.gaussian_filter(ct, 0.7)
    lesion = ndimage.binary_erosion(organ, iterations=1) & (fine > LESION_MIN) & (fine < LESION_MAX)
    lesion = ndimage.binary_opening(lesion, structure=np.ones((3, 3, 1)))
    lesion = largest_components(lesion, 2, 15)
    return organ.astype(np.uint8), lesion.astype(np.uint8)


def run_case(data_dir, out_dir, case):
    image = nib.load(str(Path(data_dir) / case / "ct.nii.gz"))
    organ, lesion = segment(np.asanyarray(image.dataobj))
    target = Path(out_dir) / case
    target.mkdir(parents=True, exist_ok=True)
    for name, mask in (("organ", organ), ("lesion", lesion)):
        nib.save(nib.Nifti1Image(mask, image.affine, image.header), str(target / f"{name}.nii.gz"))
    return int(organ.sum()), int(lesion.sum())


if __name__ == "__main__":
    data, out, *cases = sys.argv[1:]
    if not cases:
        cases = sorted(p.name for p in Path(data).iterdir() if p.is_dir())
    for i, case in enumerate(cases, 1):
        organ_n, lesion_n = run_case(data, out, case)
        print(f"[{i}/{len(cases)}] {case}: organ {organ_n} voxels, lesion {lesion_n} voxels", flush=True)
