"""The scripted reference solution for organ + lesion tasks, as tool calls (agent code, run in the sandbox)."""

from __future__ import annotations

import ast
from importlib import resources

from automedbench.api import (
    NIFTI_ONLY,
    ScriptedSolution,
    ScriptStep,
    TaskSpec,
    flawed_batches,
    plan_step,
    verify_and_submit,
)

PLAN_MD = """# Plan: {title}

## Candidates considered
| Candidate | Labels | Weights here? | Verdict |
|---|---|---|---|
| nnU-Net v2 (KiTS19) | kidney + tumour | no (offline sandbox) | best in general, unavailable |
| MONAI bundle / VISTA3D | organs, some tumour classes | no | unavailable offline |
| TotalSegmentator | organs only, no tumour class | no | would need a tumour model beside it |
| Classical HU thresholds + connected components | kidney + hypodense tumour | needs none | **chosen** |

Chosen: classical HU-threshold segmenter — it predicts both the kidney and the tumour (lesion) label and
runs offline on the CPU.

## Pipeline
1. Load each `ct.nii.gz` with nibabel; keep the affine and header.
2. Preprocess: Gaussian smoothing (sigma 1.0 voxel) to suppress noise.
3. Inference: kidney = 2 largest components with {lo:.0f} < HU < {hi:.0f} that do not touch bone (the
   blurred rim of the spine sits in the same band), closed and hole-filled;
   tumour = hypodense voxels (50–130 HU) inside the eroded kidney mask.
4. Post-process/save: binary uint8 masks `organ.nii.gz`, `lesion.nii.gz` with the input affine.
5. Validate: pilot ONE case, check shape, values {{0,1}}, voxel counts and lesion/organ ratio; then batch.
6. Verify every case's outputs and submit.
"""

PLAN_STEPS = ["load CT", "smooth", "threshold + CC", "tumour inside kidney", "save masks", "validate"]
PLAN_TITLE = "Pipeline: kidney + tumour segmentation (classical)"


def method_source() -> str:
    return resources.files(__package__).joinpath("method.py").read_text()


def source_constants(filename: str, *names: str) -> tuple[float, ...]:
    """Module-level constants of a method file (agent code), read from its source: importing it would load
    nibabel and scipy into the harness process (about half of a one-off run's own CPU) for two numbers."""
    found: dict[str, object] = {}
    for node in ast.parse(resources.files(__package__).joinpath(filename).read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
            pairs = (zip(target.elts, value.elts, strict=False) if isinstance(target, ast.Tuple)
                     and isinstance(value, ast.Tuple) else [(target, value)])
            for key, item in pairs:
                if isinstance(key, ast.Name) and key.id in names:
                    found[key.id] = ast.literal_eval(item)
    return tuple(float(found[name]) for name in names)  # type: ignore[arg-type]


def load_pilot_map(task: TaskSpec, data_dir: str, out: str, name: str) -> str:
    """Pilot-check code that loads the first case's CT and output map `a` and checks its grid against the CT."""
    return (f"case = sorted(os.listdir('{out}'))[0]\n"
            f"ct = nib.load('{data_dir}/' + case + '/{task.input_files[0]}')\n"
            f"img = nib.load('{out}/' + case + '/{name}')\n"
            "a = np.asanyarray(img.dataobj)\n"
            "assert a.shape == ct.shape, (a.shape, ct.shape)\n"
            "assert np.allclose(img.affine, ct.affine)\n")


def flawed_variants(task: TaskSpec, ws: str, data_dir: str, out: str, flags: str, name: str,
                    what: str) -> dict[str, list[ScriptStep]]:
    """The track's own damage for `wrong-format` (the cohort run, then every `name` overwritten with a fractional,
    soft, copy) and `incomplete` (half the cohort)."""
    method = f"cd {ws} && python3 segment.py {flags}{data_dir} {out}"
    half = f"$(ls {data_dir} | head -{max(1, task.case_count // 2)})"
    return flawed_batches(
        (method, f"Running the cohort, saving soft {what}.", (
            NIFTI_ONLY + "import glob, nibabel as nib, numpy as np\n"
            f"for p in glob.glob('{out}/*/{name}'):\n"
            "    img = nib.load(p)\n"
            "    a = np.asanyarray(img.dataobj).astype(np.float32) * 0.9\n"
            f"    nib.save(nib.Nifti1Image(a, img.affine), p)\nprint('saved soft {what}')\n")),
        (f"{method} {half}", "Running the first half of the cohort."))


def organ_lesion_solution(task: TaskSpec, tier: str, data_dir: str, ws: str) -> ScriptedSolution:
    out, plan = f"{ws}/outputs", f"{ws}/plan"
    organ_min, organ_max = source_constants("method.py", "ORGAN_MIN", "ORGAN_MAX")

    plan_text = PLAN_MD.format(title=task.title, lo=organ_min, hi=organ_max)
    first = f"$(ls {data_dir} | head -1)"
    steps = [
        ScriptStep("explore", "bash",
                   f"ls {data_dir} | head; ls {data_dir}/{first}; nproc; "
                   "python3 -c \"import sys; sys.modules.setdefault('pydicom', None); "
                   "import numpy, scipy, nibabel; print('numpy', numpy.__version__, "
                   "'scipy', scipy.__version__, 'nibabel', nibabel.__version__)\"",
                   say="Exploring the data and checking the environment."),
        plan_step(plan, plan_text, PLAN_TITLE, PLAN_STEPS,
                   say="Candidates: nnU-Net (KiTS19), MONAI/VISTA3D, TotalSegmentator, classical thresholds. "
                       "Writing plan.md and plan.png."),
        ScriptStep("inspect", "python",
                   NIFTI_ONLY + "import glob, nibabel as nib, numpy as np\n"
                   f"path = sorted(glob.glob('{data_dir}/*/{task.input_files[0]}'))[0]\n"
                   "img = nib.load(path)\ndata = np.asanyarray(img.dataobj)\n"
                   "print(path, 'shape', data.shape, 'dtype', data.dtype, 'zooms', img.header.get_zooms())\n"
                   "print('affine', img.affine.round(3).tolist())\n"
                   "print('HU percentiles', np.percentile(data, [1, 50, 99]).tolist())",
                   say="Checking input compatibility: shape, dtype, spacing, intensity range."),
        ScriptStep("setup", "python",
                   f"import hashlib, pathlib\nsrc = {method_source()!r}\n"
                   f"pathlib.Path('{ws}/segment.py').write_text(src)\n"
                   f"import sys; sys.path.insert(0, '{ws}')\nimport numpy as np, segment\n"
                   "organ, lesion = segment.segment(np.zeros((32, 32, 8), dtype=np.int16))\n"
                   "print('method obtained: segment.py sha256', hashlib.sha256(src.encode()).hexdigest()[:12])\n"
                   "print('model loaded and ready: smoke output', organ.shape, organ.dtype)",
                   say="Writing the method and confirming it loads."),
        ScriptStep("pilot", "bash",
                   f"cd {ws} && python3 segment.py {data_dir} {out} {first}",
                   say="Pilot on ONE case."),
        ScriptStep("validate", "python",
                   NIFTI_ONLY + "import glob, os, nibabel as nib, numpy as np\n"
                   f"case = sorted(os.listdir('{out}'))[0]\n"
                   f"ct = nib.load('{data_dir}/' + case + '/{task.input_files[0]}')\n"
                   f"organ = nib.load('{out}/' + case + '/organ.nii.gz')\n"
                   f"lesion = nib.load('{out}/' + case + '/lesion.nii.gz')\n"
                   "o, l = np.asanyarray(organ.dataobj), np.asanyarray(lesion.dataobj)\n"
                   "assert o.shape == ct.shape and l.shape == ct.shape, (o.shape, l.shape, ct.shape)\n"
                   "assert np.allclose(organ.affine, ct.affine)\n"
                   "assert set(np.unique(o)) <= {0, 1} and set(np.unique(l)) <= {0, 1}\n"
                   "n_o, n_l = int(o.sum()), int(l.sum())\n"
                   "ratio = n_l / max(n_o, 1)\n"
                   "print(case, 'organ voxels', n_o, 'lesion voxels', n_l, 'ratio', round(ratio, 4))\n"
                   "assert n_o > 1000 and ratio < 0.6\nprint('PILOT OK')",
                   say="Validating the pilot output."),
        ScriptStep("batch", "bash", f"cd {ws} && python3 segment.py {data_dir} {out}",
                   say="Running the whole cohort."),
        *verify_and_submit(
            NIFTI_ONLY + "import os, nibabel as nib, numpy as np\n"
            f"cases = sorted(os.listdir('{data_dir}'))\nbad = []\n"
            "for case in cases:\n"
            f"    shape = nib.load('{data_dir}/' + case + '/{task.input_files[0]}').shape\n"
            "    for name in ('organ.nii.gz', 'lesion.nii.gz'):\n"
            f"        p = '{out}/' + case + '/' + name\n"
            "        if not os.path.exists(p):\n            bad.append((case, name, 'missing')); continue\n"
            "        a = np.asanyarray(nib.load(p).dataobj)\n"
            "        if a.shape != shape or a.max() > 1 or a.min() < 0:\n"
            "            bad.append((case, name, 'invalid'))\n"
            "print(len(cases), 'cases checked;', 'problems:', bad or 'none')\nassert not bad"),
    ]
    variants = flawed_variants(task, ws, data_dir, out, "", "lesion.nii.gz", "lesion maps")
    return ScriptedSolution(steps, variants)
