"""The scripted reference solution for the airway-tree phantom (`segmentation/demo-airway`).

The multi-label solution's exploration, input inspection, verification and submission, with the
airway method swapped in: region growing from the trachea (`airway_method.py`, written into the
workspace as `segment.py`), a pilot check of the mask's values, size and connectivity, then the batch.
"""

from __future__ import annotations

from importlib import resources

from automedbench.api import NIFTI_ONLY, ScriptedSolution, ScriptStep, TaskSpec, plan_step

from .multilabel import multilabel_solution
from .reference import flawed_variants, load_pilot_map, source_constants

PLAN_MD = """# Plan: {title}

## Candidates considered
| Candidate | Output | Weights here? | Verdict |
|---|---|---|---|
| AeroPath / Raidionics airway model | airway mask | no (offline sandbox) | unavailable |
| nnU-Net v2 trained on ATM'22 | airway mask | no | unavailable offline |
| TotalSegmentator (trachea/bronchia task) | trachea and bronchi | no | unavailable offline |
| Classical region growing from a trachea seed | airway lumen | needs none | **chosen** |

Chosen: region growing — air in the lumen (about -1000 HU) is darker than the lung parenchyma, and the
airway wall separates the two, so a connected region grown from the trachea follows the tree.

## Pipeline
1. Load each `ct.nii.gz` with nibabel; keep the affine and header.
2. Preprocess: Gaussian smoothing (sigma 0.5 voxel).
3. Inference: seed = darkest voxel inside the body on the top slice (the trachea); grow the connected
   region below {core:.0f} HU; widen it by up to two voxels into voxels below {edge:.0f} HU (lumen edges).
4. Post-process/save: binary uint8 mask `airway.nii.gz` (label 1) with the input affine.
5. Validate: pilot ONE case, check shape, values {{0,1}}, airway voxel count and one connected tree; then batch.
6. Verify every case's mask and submit.
"""

PLAN_STEPS = ["load CT", "smooth", "seed in trachea", "region growing", "save mask", "validate"]
PLAN_TITLE = "Pipeline: airway tree by region growing"


def method_source() -> str:
    return resources.files(__package__).joinpath("airway_method.py").read_text()


def airway_solution(task: TaskSpec, tier: str, data_dir: str, ws: str) -> ScriptedSolution:
    core_hu, edge_hu = source_constants("airway_method.py", "CORE_HU", "EDGE_HU")

    base = multilabel_solution(task, tier, data_dir, ws)
    out, plan, name = f"{ws}/outputs", f"{ws}/plan", task.output_files[0]
    source = method_source()
    first = f"$(ls {data_dir} | head -1)"
    swap = {
        "plan": plan_step(plan, PLAN_MD.format(title=task.title, core=core_hu, edge=edge_hu), PLAN_TITLE,
                          PLAN_STEPS, say="Candidates: AeroPath model, nnU-Net (ATM'22), TotalSegmentator, "
                                          "region growing. Writing plan.md and plan.png."),
        "setup": ScriptStep("setup", "python",
                            f"import hashlib, pathlib\nsrc = {source!r}\n"
                            f"pathlib.Path('{ws}/segment.py').write_text(src)\n"
                            f"import sys; sys.path.insert(0, '{ws}')\nimport numpy as np, segment\n"
                            "mask = segment.segment(np.full((16, 16, 8), 40, dtype=np.int16))\n"
                            "digest = hashlib.sha256(src.encode()).hexdigest()[:12]\n"
                            "print('method obtained: segment.py sha256', digest)\n"
                            "print('method ready: smoke output', mask.shape, mask.dtype, int(mask.sum()))",
                            say="Writing the region-growing method and confirming it runs."),
        "pilot": ScriptStep("pilot", "bash", f"cd {ws} && python3 segment.py {data_dir} {out} {first}",
                            say="Pilot on ONE case."),
        "validate": ScriptStep("validate", "python",
                               NIFTI_ONLY + "import os, nibabel as nib, numpy as np\nfrom scipy import ndimage\n"
                               + load_pilot_map(task, data_dir, out, name) +
                               "assert set(np.unique(a).tolist()) <= {0, 1}\n"
                               "voxels, parts = int(np.count_nonzero(a)), ndimage.label(a)[1]\n"
                               "share = voxels / a.size\n"
                               "print(case, 'airway voxels', voxels, 'components', parts, 'share', round(share, 4))\n"
                               "assert voxels > 500 and parts == 1 and share < 0.05  # one tree, no leak\n"
                               "print('PILOT OK')",
                               say="Validating the pilot mask: values, size, one connected tree."),
        "batch": ScriptStep("batch", "bash", f"cd {ws} && python3 segment.py {data_dir} {out}",
                            say="Running the whole cohort."),
    }
    steps = [swap.get(step.phase, step) for step in base.steps]
    variants = flawed_variants(task, ws, data_dir, out, "", name, "airway masks")
    return ScriptedSolution(steps, variants)
