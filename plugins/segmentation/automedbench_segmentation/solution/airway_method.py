"""The scripted reference agent's airway method: region growing from a seed in the trachea.

Agent code: written into the workspace and run there by the reference agent, never imported by the
evaluator. Usage: `python segment.py DATA_DIR OUT_DIR [CASE ...]` writes `<case>/airway.nii.gz`.
The seed is the darkest voxel inside the body on the second-highest slice (the trachea); the tree is
the connected region below CORE_HU grown from it, widened by up to two voxels into voxels darker than
EDGE_HU (lumen blurred by the wall, never the wall itself).
"""

import sys
from pathlib import Path

if __name__ == "__main__":  # run as the agent's script; a process importing it keeps its own pydicom
    sys.modules.setdefault("pydicom", None)  # NIfTI only: nibabel's DICOM extension (pydicom, requests) unused

import nibabel as nib
import numpy as np
from scipy import ndimage

CORE_HU, EDGE_HU, BODY_HU = -900.0, -450.0, -500.0
EDGE_STEPS = 2


def seed_point(smooth):
    top = smooth[:, :, -2]
    body = ndimage.binary_fill_holes(top > BODY_HU)
    x, y = np.unravel_index(np.argmin(np.where(body, top, 0.0)), top.shape)
    return int(x), int(y), smooth.shape[2] - 2


def segment(ct):
    smooth = ndimage.gaussian_filter(ct.astype(np.float32), 0.5)
    seed = seed_point(smooth)
    labels, _ = ndimage.label(smooth < CORE_HU)
    if labels[seed] == 0:
        return np.zeros(ct.shape, dtype=np.uint8)
    tree = labels == labels[seed]
    for _ in range(EDGE_STEPS):
        tree |= ndimage.binary_dilation(tree) & (smooth < EDGE_HU)
    return tree.astype(np.uint8)


def run_case(data_dir, out_dir, case):
    image = nib.load(str(Path(data_dir) / case / "ct.nii.gz"))
    airway = segment(np.asanyarray(image.dataobj))
    target = Path(out_dir) / case
    target.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(airway, image.affine, image.header), str(target / "airway.nii.gz"))
    return int(airway.sum()), int(ndimage.label(airway)[1])


if __name__ == "__main__":
    data, out, *cases = sys.argv[1:]
    if not cases:
        cases = sorted(p.name for p in Path(data).iterdir() if p.is_dir())
    for i, case in enumerate(cases, 1):
        voxels, parts = run_case(data, out, case)
        print(f"[{i}/{len(cases)}] {case}: airway {voxels} voxels, {parts} component(s)", flush=True)
