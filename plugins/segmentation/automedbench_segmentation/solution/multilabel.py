"""The scripted reference solution for the multi-label phantom demo (agent code, run in the sandbox).

It is the organ + lesion solution with the label-map steps swapped in: the same exploration and setup,
`segment.py --labels` for the pilot and the batch, and checks of the label set instead of a binary pair.
"""

from __future__ import annotations

from automedbench.api import NIFTI_ONLY, ScriptedSolution, ScriptStep, TaskSpec, plan_step

from ..labels import task_labels
from .reference import PLAN_STEPS, PLAN_TITLE, flawed_variants, load_pilot_map, organ_lesion_solution

PLAN_MD = """# Plan: {title}

## Candidates considered
| Candidate | Labels | Weights here? | Verdict |
|---|---|---|---|
| TotalSegmentator | kidneys, liver; no tumour class | no (offline sandbox) | unavailable, and no tumour |
| nnU-Net v2 (KiTS19) + a liver model | kidney + tumour, liver | no | unavailable offline |
| MONAI bundle / VISTA3D | organs, some tumour classes | no | unavailable offline |
| Classical HU thresholds + connected components | kidney, tumour, liver | needs none | **chosen** |

## Label mapping
The method's masks map onto the task's label scheme: kidney (tumour excluded) = 1, kidney tumour = 2,
liver = 3; background 0. Painted in the order liver, kidney, tumour, so the tumour overrides the kidney.

## Pipeline
1. Load each `ct.nii.gz` with nibabel; keep the affine and header.
2. Preprocess: Gaussian smoothing (sigma 1.0 voxel).
3. Inference: kidneys = 2 largest enhancing components; tumour = hypodense voxels inside them;
   liver = largest 70–125 HU component away from the kidneys.
4. Post-process/save: one uint8 label map `labels.nii.gz` with the input affine.
5. Validate: pilot ONE case, check shape, values {{0,1,2,3}}, voxel count per label; then batch.
6. Verify every case's label map and submit.
"""


def multilabel_solution(task: TaskSpec, tier: str, data_dir: str, ws: str) -> ScriptedSolution:
    base = organ_lesion_solution(task, tier, data_dir, ws)
    out, plan = f"{ws}/outputs", f"{ws}/plan"
    name = task.output_files[0]
    allowed = sorted({0, *task_labels(task)})
    first = f"$(ls {data_dir} | head -1)"
    plan_text = PLAN_MD.format(title=task.title)
    swap = {
        "plan": plan_step(plan, plan_text, PLAN_TITLE, PLAN_STEPS,
                           say="Candidates: TotalSegmentator, nnU-Net (KiTS19) + liver model, MONAI/VISTA3D, "
                               "classical thresholds. Writing plan.md (with the label mapping) and plan.png."),
        "pilot": ScriptStep("pilot", "bash", f"cd {ws} && python3 segment.py --labels {data_dir} {out} {first}",
                            say="Pilot on ONE case."),
        "validate": ScriptStep("validate", "python",
                               NIFTI_ONLY + "import os, nibabel as nib, numpy as np\n"
                               + load_pilot_map(task, data_dir, out, name) +
                               f"assert set(np.unique(a).tolist()) <= set({allowed})\n"
                               f"counts = {{k: int(np.count_nonzero(a == k)) for k in {allowed[1:]}}}\n"
                               "print(case, 'voxels per label', counts)\n"
                               "assert counts[1] > 1000 and counts[3] > 1000\nprint('PILOT OK')",
                               say="Validating the pilot label map."),
        "batch": ScriptStep("batch", "bash", f"cd {ws} && python3 segment.py --labels {data_dir} {out}",
                            say="Running the whole cohort."),
        "verify": ScriptStep("verify", "python",
                             NIFTI_ONLY + "import os, nibabel as nib, numpy as np\n"
                             f"cases = sorted(os.listdir('{data_dir}'))\nbad = []\n"
                             "for case in cases:\n"
                             f"    shape = nib.load('{data_dir}/' + case + '/{task.input_files[0]}').shape\n"
                             f"    p = '{out}/' + case + '/{name}'\n"
                             "    if not os.path.exists(p):\n        bad.append((case, 'missing')); continue\n"
                             "    a = np.asanyarray(nib.load(p).dataobj)\n"
                             f"    if a.shape != shape or a.min() < 0 or a.max() > {allowed[-1]}:\n"
                             "        bad.append((case, 'invalid'))\n"
                             "print(len(cases), 'cases checked;', 'problems:', bad or 'none')\nassert not bad",
                             say="Verifying every label map before submitting."),
    }
    steps = [swap.get(step.phase, step) for step in base.steps]
    variants = flawed_variants(task, ws, data_dir, out, "--labels ", name, "label maps")
    return ScriptedSolution(steps, variants)
