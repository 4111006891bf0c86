"""A public-knowledge attacker against a staged segmentation task (issue 35): it reads only the staged public
folder and the download's own label files in the download's order (KiTS19 is public: anyone can fetch it),
never matching an image's voxels.

On main the cases were the download's first qualifying ones in sorted order, numbered in that order
(`kidney_001` = the first tumour case): the download's label files, in order, were the answers (Dice 1.0).
Now which cases and their ids are the staging secret's: the attacker's masks land on other cases."""

from __future__ import annotations

import attrs
import nibabel as nib
import numpy as np
import pytest
from automedbench.testing import evaluate_outputs, load_task, stage_from_folder
from test_segmentation_stager_conformance import kits

TASK = "segmentation/kidney"


@pytest.mark.slow  # stages KiTS-layout phantoms and scores them with surface metrics (about a minute under load)
def test_the_downloads_label_files_in_order_score_as_a_guess(tmp_path):
    download = kits(tmp_path / "download", 12)
    track, task = load_task(TASK)
    staged = stage_from_folder(track, attrs.evolve(task, case_count=8), tmp_path / "root", download)
    labels = sorted((download / "data").glob("case_*/segmentation.nii.gz"))
    dest = tmp_path / "attack"
    for case, path in zip(sorted(staged.case_ids), labels, strict=False):
        image = nib.load(str(staged.public / case / "ct.nii.gz"))
        label = np.asanyarray(nib.load(str(path)).dataobj)
        for name, mask in (("organ.nii.gz", label > 0), ("lesion.nii.gz", label == 2)):
            (dest / case).mkdir(parents=True, exist_ok=True)
            nib.save(nib.Nifti1Image(mask.astype(np.uint8), image.affine), str(dest / case / name))
    result = evaluate_outputs(TASK, submission=dest, data_root=tmp_path / "root", work=tmp_path / "eval")
    assert len(result.cases) == 8 and all(c.valid for c in result.cases)  # every mask passes the contract
    assert result.task.partial < 0.3 and result.aggregate.rating not in ("A", "B"), result.task.partial
