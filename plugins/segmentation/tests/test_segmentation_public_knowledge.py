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


def attack(download, staged, dest):
    """Give each staged case, in id order, the download's label files in the download's order."""
    labels = sorted((download / "data").glob("case_*/segmentation.nii.gz"))
    for case, path in zip(sorted(staged.case_ids), labels, strict=False):
        image = nib.load(str(staged.public / case / "ct.nii.gz"))
        label = np.asanyarray(nib.load(str(path)).dataobj)
        for name, mask in (("organ.nii.gz", label > 0), ("lesion.nii.gz", label == 2)):
            (dest / case).mkdir(parents=True, exist_ok=True)
            nib.save(nib.Nifti1Image(mask.astype(np.uint8), image.affine), str(dest / case / name))


@pytest.mark.slow  # stages KiTS-layout phantoms twice and scores them with surface metrics (about a minute under load)
def test_the_downloads_label_files_in_order_score_as_a_guess(tmp_path):
    """A guess lands on its case with odds 1 in 12 (the phantoms' 12 distinct places), so one staging of 8
    reaches B (3 lucky cases) about 2 % of the time: the bound is on two stagings together (at most 8 of 16
    cases right: a chance of about 1 in 800 000 to exceed it; in download order all 16 were right) and no
    staging rates A (6 of 8 right: about 1 in 120 000)."""
    download = kits(tmp_path / "download", 12)
    track, task = load_task(TASK)
    scores = []
    for n in range(2):
        staged = stage_from_folder(track, attrs.evolve(task, case_count=8), tmp_path / f"root{n}", download)
        attack(download, staged, tmp_path / f"attack{n}")
        result = evaluate_outputs(TASK, submission=tmp_path / f"attack{n}", data_root=tmp_path / f"root{n}",
                                  work=tmp_path / f"eval{n}")
        assert len(result.cases) == 8 and all(c.valid for c in result.cases)  # every mask passes the contract
        assert result.aggregate.rating != "A", result.task.partial
        scores.append(result.task.partial)
    assert sum(scores) * 8 <= 8, scores
