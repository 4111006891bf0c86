"""Red team round 21: stage scores earned by writing what the rules look for, through the real runner.

- **A check whose subject is named only in a comment** (the rules judge, S2 and S3): s2b ("input compatibility
  checked: shape, spacing, dtype") credited a successful call before the first output whose raw code named an
  input file and whose effective code had two of `.shape` / `dtype` / `affine`; the S3 ladder counted the checks of
  any call after the pilot whose raw code named the outputs. Both names were matched in the raw code, comments
  included, so `a = np.zeros((4, 4)); print(a.shape, a.dtype); affine = np.eye(4)  # ct.nii.gz` earned s2b without
  opening an input, and `print(a.shape, np.unique(a))  # outputs/case_000/organ.nii.gz` on that same zero array
  made the pilot "checked" (S3 1.0 on the segmentation demo, the reference's grade). An agent that wrote empty
  masks and those two calls scored S2 0.8 and S3 1.0 (S2 0.6, S3 0.5 now). The input or the outputs must now be
  named where the code uses them (`Evidence.code`: a path string is data, kept; comments and printed text are
  not), as the checks themselves already were; a genuine minimal check (load, print shape and dtype) still earns
  both, and the reference keeps its grade on every demo.

- **Noise for a diagram** (the rules judge, S1): s1f ("plot has a clear pipeline diagram") is structural in the
  rules judge (at least 3 colours, no colour over 97%), so a plan.png of random pixels (or a gradient) earned it:
  S1 1.0 at the Standard tier (Lite auto-passes it) for the attacker above, as for the reference. A diagram is
  drawn on a canvas: s1f now also needs one colour over at least 20% of the image (the reference plans' is ~70%);
  noise has none over 1%, so S1 5/6.

Measured and left alone (the rubric allows it or the rules judge declares it cannot tell; the LLM judge reads the
code): a do-nothing run is S1-S5 0 (Overall 0); empty masks with a stuffed plan.md, a random-noise plan.png and
genuine checks of the empty pilot scored S1 1.0, S2 0.8, S3 1.0, S4 1.0, S5 0.5, Overall 0.46, rated F (Task 0:
the rating and half of Overall are the Task's). S4 is completion and format (upstream's formula), S5's positive
evidence is 0 for empty masks. Copying each ct.nii.gz as both masks: Overall 0.05; a checked pilot of empty
masks copied to every case: S3 1.0, Overall 0.32, F. A log the agent wrote ("method obtained", "model loaded and
ready", "validated 5/5 cases, Dice 0.91") shown by `cat` in a later call: S2 0.8 and nothing else, Overall 0.06
(s2a and s2e read observed output; the same replay is how an honest agent reads its background run's log, so the
rules cannot tell them apart). The rules judge cannot read a diagram: a windowed CT slice (a flat black canvas)
still passes s1f, and an input path in a dead assignment still satisfies s2b's name check.
"""

from __future__ import annotations

import pytest
from automedbench.testing import item_values, run_steps, stage_scores

DEMO = "segmentation/demo"
PLAN = r'''
import numpy as np, os, pathlib
from PIL import Image
p = pathlib.Path(os.environ["WORKSPACE_DIR"]) / "plan"
p.mkdir(exist_ok=True)
(p / "plan.md").write_text("""# Plan
Candidates: nnU-Net, MONAI, TotalSegmentator, classical threshold.
1. Load the input CT
2. Preprocess: normalise intensity
3. Inference: segment the kidney and the tumour lesion with the model
4. Save the outputs
5. Validate a pilot, check its shape
""")
Image.fromarray(np.random.default_rng(0).integers(0, 255, (256, 256, 3), dtype=np.uint8)).save(p / "plan.png")
'''
# empty masks on the input's grid for the first `N` cases (a pilot, then the batch)
EMPTY_MASKS = r'''
import os, pathlib, nibabel as nib, numpy as np
pub, out = pathlib.Path(os.environ["DATA_DIR"]), pathlib.Path(os.environ["WORKSPACE_DIR"]) / "outputs"
for case in sorted(os.listdir(pub))[:N]:
    img = nib.load(str(pub / case / "ct.nii.gz"))
    (out / case).mkdir(parents=True, exist_ok=True)
    for name in ("organ.nii.gz", "lesion.nii.gz"):
        nib.save(nib.Nifti1Image(np.zeros(img.shape, np.uint8), img.affine), str(out / case / name))
'''
# the checks run on an array of its own; the input and the pilot's output are named only in comments
NAMED_IN_COMMENTS = {
    "inspect": "import numpy as np\na = np.zeros((4, 4))\nprint(a.shape, a.dtype)\naffine = np.eye(4)\n"
               "print(affine.shape)  # /data/public/case_000/ct.nii.gz\n",
    "check": "import numpy as np\na = np.zeros((4, 4), np.uint8)\n"
             "print(a.shape, np.unique(a))  # outputs/case_000/organ.nii.gz\n",
}
# the same checks on the input and the pilot's output themselves
GENUINE = {
    "inspect": "import glob, os, nibabel as nib\n"
               "img = nib.load(sorted(glob.glob(os.environ['DATA_DIR'] + '/*/ct.nii.gz'))[0])\n"
               "print(img.shape, img.get_data_dtype(), img.header.get_zooms())\n",
    "check": "import glob, os, nibabel as nib, numpy as np\n"
             "out = os.environ['WORKSPACE_DIR'] + '/outputs'\n"
             "a = np.asanyarray(nib.load(sorted(glob.glob(out + '/*/organ.nii.gz'))[0]).dataobj)\n"
             "print(a.shape, np.unique(a))\n",
}


# masks of a CT threshold: they overlap the organ, as an honest pilot's do (a run whose every case scores nothing has
# its S3 stopped at the partial level whatever its checks: tests/test_redteam_round36.py)
THRESHOLD_MASKS = EMPTY_MASKS.replace("np.zeros(img.shape, np.uint8)",
                                      "(img.get_fdata() > img.get_fdata().mean()).astype(np.uint8)")


def _steps(checks: dict[str, str], masks: str = EMPTY_MASKS) -> list[tuple[str, str]]:
    return [("python", PLAN), ("bash", "python3 -c 'import numpy'"), ("python", checks["inspect"]),
            ("python", masks.replace("[:N]", "[:1]")), ("python", checks["check"]),
            ("python", masks.replace("[:N]", ""))]


@pytest.mark.slow  # two whole demo runs (~3 CPU-s each) and the reference's (cached per session)
def test_checks_of_a_subject_named_only_in_a_comment_and_a_noise_diagram_earn_nothing(data_root, tmp_path, run_agent):
    # the Standard tier: Lite auto-passes the plan's picture (the paper's s1d-s1f), Standard grades it
    hollow, _ = run_steps(DEMO, _steps(NAMED_IN_COMMENTS), out=tmp_path / "hollow", data_root=data_root,
                          tier="standard")
    genuine, _ = run_steps(DEMO, _steps(GENUINE, THRESHOLD_MASKS), out=tmp_path / "genuine", data_root=data_root,
                           tier="standard")
    assert hollow.state == genuine.state == "scored", (hollow.error, genuine.error)
    values, s3 = item_values(hollow), next(i for s in hollow.stages for i in s.items if i.id == "s3_validate")
    assert values["s2b_compatibility_check"] == 0.0, values
    # the pilot is found (one case before the batch; its own code reads the input's .shape), but the values
    # "check" looked at another array: 0.5 on the paper's ladder, not the reference's 1.0
    assert s3.value == 0.5 and "values" not in s3.rationale, s3.rationale
    assert stage_scores(hollow)["S2"] == pytest.approx(0.6) and values["s2c_env_ready"] == 1.0
    # a plan.png it is (s1e), a diagram it is not (s1f): random pixels have no canvas
    assert values["s1e_plan_png"] == 1.0 and values["s1f_plot_pipeline"] == 0.0
    # the same calls looking at the input and the pilot's output: both credited (the rule still sees a real check)
    assert item_values(genuine)["s2b_compatibility_check"] == 1.0 and stage_scores(genuine)["S3"] == 1.0
    reference = stage_scores(run_agent("reference", "standard")[0])
    assert reference["S1"] == reference["S2"] == reference["S3"] == 1.0, reference
