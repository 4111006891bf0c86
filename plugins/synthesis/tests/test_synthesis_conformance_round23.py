"""Legal but unusual synthesis outputs against the release's checker and scorer (round 23), through `evaluate`.

The release (tracks-full-research §4.3), restated here as `release_case`: the output is loaded with nibabel as
float32 (any stored voxel type, scaling applied), must be a finite 3-D array of the target's shape (the affine is
not checked); SSIM per plane along array axis 2 (`release_case_ssim`, round 18); Task = clip(mean SSIM over the
scored cases, 0, 1) x scored / expected; one present output failing the check rates F (round 17).

Each variant below replaces one case's `sct.nii.gz` of the perfect submission: float64, int16, uint8 with a
scale, another orientation's affine (all valid and scored as the release), a 4-D (x, y, z, 1) array, NaN and
Infinity voxels, a shape one plane short (invalid in both), and an uncompressed NIfTI under the `.nii.gz` name:
nibabel takes the name for gzip and fails, so the release refuses it; ours read it as a volume (valid, scored,
the run rated A where the release's is F). Now refused with the fix in its reason.
"""

from __future__ import annotations

import shutil

import nibabel as nib
import numpy as np
import pytest
from automedbench.testing import evaluate_outputs, stage_task
from automedbench_synthesis import contract
from test_synthesis_conformance_round18 import release_case_ssim

TASK = "synthesis/demo"


def _volume(path) -> tuple[np.ndarray, np.ndarray]:
    image = nib.load(path)
    return np.asarray(image.get_fdata(dtype=np.float32)), image.affine


def _uint8_scaled(path):
    volume, affine = _volume(path)
    lo, hi = float(volume.min()), float(volume.max())
    image = nib.Nifti1Image(np.rint((volume - lo) / (hi - lo) * 255).astype(np.uint8), affine)
    image.header.set_slope_inter((hi - lo) / 255, lo)
    nib.save(image, path)


def _save(path, volume, affine=None):
    nib.save(nib.Nifti1Image(volume, _volume(path)[1] if affine is None else affine), path)


VARIANTS = {  # name -> (change to the file, valid in the release)
    "float64": (lambda p: _save(p, _volume(p)[0].astype(np.float64)), True),
    "int16": (lambda p: _save(p, np.rint(_volume(p)[0]).astype(np.int16)), True),
    "uint8 scaled": (_uint8_scaled, True),
    "LPS affine": (lambda p: _save(p, _volume(p)[0], np.diag([-1.0, -1.0, 2.5, 1.0])), True),
    "4-D (x, y, z, 1)": (lambda p: _save(p, _volume(p)[0][..., None]), False),
    "a NaN voxel": (lambda p: _save(p, np.where(np.indices(_volume(p)[0].shape).sum(0) == 3, np.nan,
                                                _volume(p)[0]).astype(np.float32)), False),
    "an Infinity voxel": (lambda p: _save(p, np.where(np.indices(_volume(p)[0].shape).sum(0) == 3, np.inf,
                                                     _volume(p)[0]).astype(np.float32)), False),
    "one plane short": (lambda p: _save(p, _volume(p)[0][:, :, :-1]), False),
    "plain .nii under .nii.gz": (lambda p: p.write_bytes(nib.Nifti1Image(*_volume(p)).to_bytes()), False),
}


def release_case(path, target: np.ndarray) -> float | None:
    """The release's score of one output file: None when its checker refuses it (nibabel cannot load it, not
    3-D, another shape, not finite)."""
    try:
        volume = np.asarray(nib.load(path).get_fdata(dtype=np.float32))
    except Exception:
        return None
    if volume.ndim != 3 or volume.shape != target.shape or not np.isfinite(volume).all():
        return None
    return release_case_ssim(target, volume)


def _release_of(staged, case_id: str, output) -> float | None:
    target, _ = _volume(staged.private / case_id / "target.nii.gz")
    return release_case(output, target)


@pytest.fixture(scope="module")
def release_of_perfect(amb_data_root, perfect) -> dict[str, float | None]:
    """The release's score of each perfect output as written: every variant leaves all cases but its first as they
    are (copied unchanged), so their scores are computed once for the module, not again per variant."""
    source, ids = perfect
    staged = stage_task(TASK, amb_data_root)
    return {case_id: _release_of(staged, case_id, source / case_id / contract.OUTPUT) for case_id in ids[1:]}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_an_unusual_output_is_judged_and_scored_as_the_release(amb_data_root, tmp_path, perfect, release_of_perfect,
                                                                variant):
    source, ids = perfect
    staged = stage_task(TASK, amb_data_root)
    outputs = tmp_path / "outputs"
    shutil.copytree(source, outputs)
    change, release_valid = VARIANTS[variant]
    changed = outputs / ids[0] / contract.OUTPUT
    change(changed)
    release = {ids[0]: _release_of(staged, ids[0], changed), **release_of_perfect}
    assert (release[ids[0]] is not None) is release_valid  # the restatement reads the variant as intended
    scored = [v for v in release.values() if v is not None]
    release_task = min(max(float(np.mean(scored)), 0.0), 1.0) * len(scored) / len(ids)

    result = evaluate_outputs(TASK, data_root=amb_data_root, work=tmp_path / "work", submission=outputs)
    cases = {c.case_id: c for c in result.cases}
    assert cases[ids[0]].valid is release_valid, cases[ids[0]].reasons
    assert all(cases[c].valid for c in ids[1:])
    assert result.task.partial == pytest.approx(release_task, abs=1e-4)
    assert (result.aggregate.rating == "F") is not release_valid, result.aggregate.rating_reason
    if variant.startswith("plain"):
        assert contract.NOT_GZIP in " ".join(cases[ids[0]].reasons)
