"""Red team round 28: hidden answers that public information decides, attacked through the real stager and evaluator.

- **The shipped image's fine detail, registered onto a low-resolution input** (enhancement/demo-sr, the demo's
  `refguard.secret_variant`): each reference is a secret variant (a similarity transform, a smooth elastic
  field, a smooth gain and offset, smooth blobs) of a crop of pydicom-data's shoulder MR, which every sandbox
  can read, and demo.py names which crop and mirroring a case id holds. Every one of those changes shows in
  the input's low band, and the input lacks only the high band: an agent that registered the shipped crop
  onto the zero-filled input (a similarity fit, then scikit-image's TV-L1 optical flow), fitted a smooth gain
  and added the registered crop's high band to the input's low band scored Task 0.924, rating A, through
  `automedbench evaluate` (the best classical method, zero-filled k-space, 0.88 on that staging: B), with
  no super-resolution at all. Each reference is now also jittered (`refguard.jitter`: a displacement of
  at most 3 px varying over about 3 px, a scale the low band cannot show), so the shipped high band no
  longer lines up with the reference's: the same agent scored 0.863 (C) against zero-filled's 0.895. The
  demo's bands were measured again (zero-filled 0.891-0.895 over three stagings; A from 0.913, B from 0.873);
  the scripted reference (zero-filled) still rates B.

Measured and left alone (scripts reading only the public inputs and the installed packages; no test kept):
report_gen/demo's PNG sizes (the generator's own renders with seeds of the agent's give each study kind's
expected sizes; studies assigned by size within their view count) named 7 of 12 studies' findings: Task 0.721,
C (scripted reference 0.84, nearest-template 0.64-0.69); the signal is the pixels' compressibility (the
decoded pixels compressed again give the same numbers), so storing them uncompressed would not remove it.
detection/demo's PNG size follows its box count (Spearman 0.91), which mAP does not score; classification/demo's
JPEG sizes overlap between classes; segmentation/demo's tumour-free case is not the smallest ct.nii.gz.
enhancement/demo-ldct: registering the shipped slice onto the noisy input (similarity only) gave SSIM 0.89
against nlm's 0.974; an optical-flow refinement did not converge under the noise (Task 0.761 through
`automedbench evaluate`), so no gain over denoising was shown there. The demo stagers' order, times and
case ids (relaid by the engine) and the release stagers' header fields were read in code: nothing new.
"""

from __future__ import annotations

import numpy as np
from automedbench.api import StagingSecret, secret_variant
from automedbench.testing import evaluate_outputs, load_task, stage_task

SR = "enhancement/demo-sr"


def _best_registration(task, staged, case_id: str) -> np.ndarray:
    """What a perfect registration of everything the input shows gives: the case's variant (the staging's own
    secret, read here as no agent can) before the jitter, whose high band is added to the input's low band."""
    from automedbench_enhancement.data import degrade, demo

    p = task.params
    seed = StagingSecret.load(staged.private / "staging.secret").seed("demo")
    image, _ = demo.read_dicom(p["source"])
    scaled = np.clip(image / np.percentile(image, 99.5), 0.0, 1.0)
    h, w = p["output_shape"]
    i = int(case_id.split("_")[1]) - 1
    top, left = p["crops"][i % len(p["crops"])]
    crop = scaled[top:top + h, left:left + w]
    if (i // len(p["crops"])) % 2 == 1:
        crop = crop[:, ::-1]
    registered = np.clip(secret_variant(crop, [seed, demo.VARIANT, i], fill=0.0, offset=0.02,
                                        blobs={"count": (4, 8), "radius_px": (4.0, 16.0), "contrast": (0.05, 0.15),
                                               "where": crop > 0.1}), 0.0, 1.0)
    low = np.load(staged.public / case_id / "input.npy")
    high_band = registered - degrade.zero_fill_up(degrade.kspace_down(registered))
    return np.clip(degrade.zero_fill_up(low) + high_band, 0.0, 1.0).astype(np.float32)


def test_the_shipped_crops_fine_detail_registered_onto_the_input_gains_nothing(tmp_path):
    """Before: a perfect registration of the shipped crop (what the agent above approached, 0.924) gave every
    reference back bit for bit but rounding: Task 1.0, rating A. Now it scores below zero-filled k-space, the
    honest classical method, on the same staging."""
    task = load_task(SR)[1]
    staged = stage_task(SR, tmp_path / "data")
    attack = tmp_path / "attack"
    for case_id in staged.case_ids:
        (attack / case_id).mkdir(parents=True)
        np.save(attack / case_id / "enhanced.npy", _best_registration(task, staged, case_id))
    result = evaluate_outputs(SR, data_root=tmp_path / "data", work=tmp_path / "eval", submission=attack)
    honest = evaluate_outputs(SR, data_root=tmp_path / "data", work=tmp_path / "honest", baseline="zero-filled")
    assert result.task.components["valid_cases"] == len(staged.case_ids)
    assert result.task.partial < honest.task.partial, (result.task.partial, honest.task.partial)
    assert result.aggregate.rating != "A" and honest.aggregate.rating == "B"
