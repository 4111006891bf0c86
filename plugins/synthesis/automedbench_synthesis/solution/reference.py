"""The scripted reference solution for the synthesis demos, as tool calls (agent code, run in the sandbox)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from automedbench.api import (
    NIFTI_ONLY,
    ScriptedSolution,
    ScriptStep,
    flawed_batches,
    plan_step,
    solution_source,
    verify_each_case,
)

if TYPE_CHECKING:
    from automedbench.api import TaskSpec

PLAN_CTSR = """# Plan: {title}

## Candidates considered
| Method | Weights | Offline here? | Verdict |
|---|---|---|---|
| PlainCNN x4 (ISBI 2023, Roldbach) | pretrained download | no (no network) | pinned, unavailable |
| AE_Maxpool / UNet x4 | pretrained download | no | unavailable offline |
| Trilinear / linear interpolation along z | none | yes | baseline only: the input IS this, it gains nothing |
| Cubic spline through the kept slices | none | yes | baseline: smooths, cannot move edges |
| Motion-compensated (optical flow) slice interpolation | none | yes | **chosen**: oblique edges move, not ghost |

Chosen: find the kept slices (the input is exactly linear in z between them), estimate the in-plane
optical flow (scikit-image TV-L1) between each pair of kept slices, and rebuild the slices between by
warping both towards the in-between position and blending; kept slices unchanged, HU and affine kept.

## Pipeline
1. Load each `ct.nii.gz` with nibabel; check shape, dtype, affine/zooms and the HU range.
2. Preprocess: find the kept-slice phase from the second difference along z (scale 4).
3. Inference: optical flow between kept slices, motion-compensated interpolation of the slices between.
4. Post-process/save: float32 HU, the input's affine and header, `outputs/<case>/sct.nii.gz`.
5. Validate: pilot ONE case; shape/affine, finite HU range, kept slices unchanged, second difference
   along z no longer zero between kept slices (not a cross-fade), better than the input copy.
6. Run the batch, verify every file, submit.
"""

PLAN_MRCT = """# Plan: {title}

## Candidates considered
| Method | Weights | Offline here? | Verdict |
|---|---|---|---|
| VBoussot SynthRAD2025 HN (KonfAI 2.5D U-Net++) | pretrained download | no (no network) | pinned, unavailable |
| aehrc Dataset262 (nnU-Net) | pretrained download | no | unavailable offline |
| Linear MR -> HU intensity map | none | yes | baseline: bone comes out as air |
| Tissue classes (k-means) + geometry for bone vs air | none | yes | **chosen** |

Chosen: bias-correct the MR inside the mask, cluster it into 4 tissue classes (k-means), give each a
typical HU; the darkest class is bone in the outer shell of the head and air elsewhere; -1000 HU outside.

## Pipeline
1. Load `mr.nii.gz` and `mask.nii.gz` with nibabel; check shape, dtype, affine and value ranges.
2. Preprocess: divide by a smooth (sigma 8 voxel) version of the MR to remove the bias field.
3. Inference: k-means into 4 classes inside the mask; class -> HU; dark voxels split into bone / air.
4. Post-process/save: float32 HU, the MR's affine, `outputs/<case>/sct.nii.gz`.
5. Validate: pilot ONE case; shape/affine, finite HU range, bone and air present inside the mask.
6. Run the batch, verify every file, submit.
"""

VALIDATE_CTSR = NIFTI_ONLY + """import nibabel as nib
import numpy as np
x_img = nib.load('{data}/{case}/ct.nii.gz'); y_img = nib.load('{out}/{case}/sct.nii.gz')
x = np.asarray(x_img.dataobj, dtype=np.float32); y = np.asarray(y_img.dataobj, dtype=np.float32)
print('shape', y.shape, 'dtype', y.dtype, 'finite', bool(np.isfinite(y).all()))
print('HU range', float(y.min()), float(y.max()), 'affine equal', bool(np.allclose(x_img.affine, y_img.affine)))
assert y.shape == x.shape and np.allclose(x_img.affine, y_img.affine) and np.isfinite(y).all()
assert -1100 < y.min() < y.max() < 3500 and y.std() > 10, 'implausible HU range or constant volume'
kept = list(range(0, x.shape[2], 4))
assert np.allclose(y[:, :, kept], x[:, :, kept], atol=1), 'kept slices changed'
def second_difference(v):  # zero between kept slices when the volume is a cross-fade of them
    return float(np.abs(v[:, :, 2:] - 2 * v[:, :, 1:-1] + v[:, :, :-2]).mean())
print('second difference along z: input', round(second_difference(x), 3), '-> output', round(second_difference(y), 3))
assert second_difference(y) > 1.2 * second_difference(x), 'still a linear cross-fade: no better than the input'
print('PILOT OK: shape, affine, HU range, sharper along z than the input')
"""

VALIDATE_MRCT = NIFTI_ONLY + """import nibabel as nib
import numpy as np
x_img = nib.load('{data}/{case}/mr.nii.gz'); y_img = nib.load('{out}/{case}/sct.nii.gz')
mask = np.asarray(nib.load('{data}/{case}/mask.nii.gz').dataobj) > 0
y = np.asarray(y_img.dataobj, dtype=np.float32)
print('shape', y.shape, 'dtype', y.dtype, 'finite', bool(np.isfinite(y).all()))
print('HU range', float(y.min()), float(y.max()), 'affine equal', bool(np.allclose(x_img.affine, y_img.affine)))
assert y.shape == x_img.shape and np.allclose(x_img.affine, y_img.affine) and np.isfinite(y).all()
assert -1100 < y.min() < y.max() < 3500 and y.std() > 10, 'implausible HU range or constant volume'
def tissue_share(values, lo, hi):  # the share of voxels in an HU band
    return float(((values > lo) & (values < hi)).mean())
bone, air = tissue_share(y[mask], 300, 4000), tissue_share(y[~mask], -2000, -900)
print('tissue check: bone share in the mask', round(bone, 3), 'air outside the mask', round(air, 3))
assert 0.01 < bone < 0.5 and air > 0.95, 'bone missing or air outside the mask wrong'
print('PILOT OK: shape, affine, HU range, bone and air where expected')
"""

# every output: on its input's grid (shape and affine), finite
VERIFY_IMPORTS = NIFTI_ONLY + "import pathlib\nimport nibabel as nib\nimport numpy as np\n"
VERIFY_SOURCE = "source = nib.load(str(sorted((data / case).glob('*.nii.gz'))[-1]))"
VERIFY_CHECK = """y = nib.load(str(out / case / 'sct.nii.gz'))
v = np.asarray(y.dataobj)
assert y.shape == source.shape and np.allclose(y.affine, source.affine) and np.isfinite(v).all(), y.shape"""


def reference_solution(task: TaskSpec, tier: str, data_dir: str, ws: str) -> ScriptedSolution:
    ctsr = task.params["kind"] == "ctsr"
    out, plan = f"{ws}/outputs", f"{ws}/plan"
    first = "$(ls " + data_dir + " | head -1)"
    method = f"cd {ws} && python3 synth.py {data_dir} {out}"
    plan_md = (PLAN_CTSR if ctsr else PLAN_MRCT).format(title=task.title)
    chosen = "motion-compensated interpolation" if ctsr else "tissue-class mapping"
    first_file = "ct.nii.gz" if ctsr else "mr.nii.gz"
    steps = [
        ScriptStep("explore", "bash",
                   f"ls {data_dir} | head; ls {data_dir}/$(ls {data_dir} | head -1); nproc; "
                   "python3 -c \"import sys; sys.modules.setdefault('pydicom', None); "
                   "import numpy, scipy, skimage, nibabel; print('numpy', numpy.__version__, 'scipy', "
                   "scipy.__version__, 'scikit-image', skimage.__version__, 'nibabel', nibabel.__version__)\"",
                   say="Exploring the cases and checking the environment."),
        plan_step(plan, plan_md, f"Pipeline: {task.title}",
                  ["NIfTI input", "preprocess", chosen, "back to HU", "sct.nii.gz", "validate"],
                  say=f"Candidates compared; {chosen} chosen. Writing plan.md and plan.png."),
        ScriptStep("inspect", "python",
                   NIFTI_ONLY + "import pathlib\nimport nibabel as nib\nimport numpy as np\n"
                   f"cases = sorted(p for p in pathlib.Path('{data_dir}').iterdir() if p.is_dir())\n"
                   f"img = nib.load(str(cases[0] / '{first_file}'))\nx = np.asarray(img.dataobj)\n"
                   "print(len(cases), 'cases; shape', x.shape, 'dtype', x.dtype, 'zooms', img.header.get_zooms(),"
                   " 'range', float(x.min()), float(x.max()))\nprint('affine', img.affine.round(3).tolist())",
                   say="Checking the input: shape, dtype, spacing/affine and value range."),
        ScriptStep("setup", "python",
                   f"import hashlib, pathlib, sys\nsrc = {solution_source(__package__)!r}\n"
                   f"pathlib.Path('{ws}/synth.py').write_text(src)\nsys.path.insert(0, '{ws}')\n"
                   "import numpy as np\nimport synth\n"
                   + ("v = np.zeros((16, 16, 9), dtype=np.float32); v[:, :, ::4] = [[[0, 100, 200]]]\n"
                      "print('kept-slice phase on a test volume:', synth.kept_phase(v, 4)[0])\n" if ctsr else
                      "print('tissue HU map:', [0.0, 10.0, 40.0, 28.0], 'bone 1000, air -900')\n")
                   + "print('method obtained: synth.py sha256', hashlib.sha256(src.encode()).hexdigest()[:12])\n"
                   "print('method ready')",
                   say="Writing the method and checking it loads."),
        ScriptStep("pilot", "bash", f"{method} {first}", say="Pilot: ONE case end to end."),
        ScriptStep("validate", "python",
                   "import pathlib\n"
                   f"case = sorted(p.name for p in pathlib.Path('{out}').iterdir())[0]\n"
                   + (VALIDATE_CTSR if ctsr else VALIDATE_MRCT).replace("{case}", "' + case + '").format(
                       data=data_dir, out=out),
                   say="Checking the pilot output: shape, affine, HU range, better than the input."),
        ScriptStep("batch", "bash", method, say="Synthesising every case."),
        *verify_each_case(data_dir, out, VERIFY_IMPORTS, VERIFY_SOURCE, VERIFY_CHECK),
    ]
    keep = math.ceil(task.case_count * 2 / 3)  # more than half: the pre-submit gate lets it through
    return ScriptedSolution(steps, flawed_batches(
        (f"{method} --normalised", "Synthesising every case, saving the network's [0, 1] scale."),
        (f"{method} --limit {keep}", f"Synthesising the first {keep} cases.")))
