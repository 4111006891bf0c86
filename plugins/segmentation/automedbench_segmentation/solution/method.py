"""The scripted reference agent's method: HU thresholds, connected components and hole filling.

This file is written into the agent's workspace and run there by the reference agent (it is agent
code, never imported by the evaluator). Usage: `python segment.py [--labels] DATA_DIR OUT_DIR [CASE ...]`;
`--labels` writes one label map `labels.nii.gz` (1 kidney, 2 kidney tumour, 3 liver) instead of the pair.
"""

import sys
from pathlib import Path

if __name__ == "__main__":  # run as the agent's script; a process importing it keeps its own pydicom
    sys.modules.setdefault("pydicom", None)  # NIfTI only: nibabel's DICOM extension (pydicom, requests) unused

import nibabel as nib
import numpy as np
from scipy import ndimage

ORGAN_MIN, ORGAN_MAX = 110.0, 400.0
LESION_MIN, LESION_MAX = 50.0, 130.0
LIVER_MIN, LIVER_MAX = 70.0, 125.0


def largest_components(mask, count, min_voxels):
    labels, n = ndimage.label(mask)
    if n == 0:
        return mask
    sizes = ndimage.sum(mask, labels, range(1, n + 1))
    order = np.argsort(sizes)[::-1][:count]
    keep = [i + 1 for i in order if sizes[i] >= min_voxels]
    return np.isin(labels, keep)


def drop_touching(mask, avoid):
    """The mask without its components that touch `avoid` (the blurred rim of bone sits in the organ's HU band)."""
    labels, _ = ndimage.label(mask)
    touching = np.unique(labels[avoid & mask])
    return mask & ~np.isin(labels, touching[touching > 0])


def fill_slices(mask):
    out = np.zeros_like(mask)
    for z in range(mask.shape[2]):
        out[:, :, z] = ndimage.binary_fill_holes(mask[:, :, z])
    return out


def segment(ct):
    ct = ct.astype(np.float32)
    smooth = ndimage.gaussian_filter(ct, 1.0)
    band = (smooth > ORGAN_MIN) & (smooth < ORGAN_MAX)
    bone = ndimage.binary_dilation(smooth >= ORGAN_MAX, iterations=1)
    kidneys = largest_components(drop_touching(band, bone), 2, 500)
    organ = fill_slices(ndimage.binary_closing(kidneys, iterations=1))
    fine = ndimage.gaussian_filter(ct, 0.7)
    lesion = ndimage.binary_erosion(organ, iterations=1) & (fine > LESION_MIN) & (fine < LESION_MAX)
    lesion = ndimage.binary_opening(lesion, structure=np.ones((3, 3, 1)))
    lesion = largest_components(lesion, 2, 15)
    return organ.astype(np.uint8), lesion.astype(np.uint8)


def segment_labels(ct):
    """Label map: the kidney/tumour pair plus the liver (mid-HU, away from the kidneys, largest blob)."""
    organ, lesion = segment(ct)
    smooth = ndimage.gaussian_filter(ct.astype(np.float32), 1.0)
    away = ~ndimage.binary_dilation(organ, iterations=2)
    liver = largest_components((smooth > LIVER_MIN) & (smooth < LIVER_MAX) & away, 1, 500)
    liver = fill_slices(ndimage.binary_opening(liver, iterations=1))
    labels = np.zeros(ct.shape, dtype=np.uint8)
    labels[liver] = 3
    labels[organ.astype(bool)] = 1
    labels[lesion.astype(bool)] = 2
    return labels


def run_case(data_dir, out_dir, case, as_labels=False):
    image = nib.load(str(Path(data_dir) / case / "ct.nii.gz"))
    ct = np.asanyarray(image.dataobj)
    target = Path(out_dir) / case
    target.mkdir(parents=True, exist_ok=True)
    if as_labels:
        labels = segment_labels(ct)
        nib.save(nib.Nifti1Image(labels, image.affine, image.header), str(target / "labels.nii.gz"))
        return {k: int(np.count_nonzero(labels == k)) for k in (1, 2, 3)}
    organ, lesion = segment(ct)
    for name, mask in (("organ", organ), ("lesion", lesion)):
        nib.save(nib.Nifti1Image(mask, image.affine, image.header), str(target / f"{name}.nii.gz"))
    return {"organ": int(organ.sum()), "lesion": int(lesion.sum())}


if __name__ == "__main__":
    args = sys.argv[1:]
    as_labels = "--labels" in args
    data, out, *cases = [a for a in args if a != "--labels"]
    if not cases:
        cases = sorted(p.name for p in Path(data).iterdir() if p.is_dir())
    for i, case in enumerate(cases, 1):
        counts = run_case(data, out, case, as_labels)
        shown = ", ".join(f"{k} {v} voxels" for k, v in counts.items())
        print(f"[{i}/{len(cases)}] {case}: {shown}", flush=True)
