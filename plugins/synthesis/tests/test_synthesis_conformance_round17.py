"""Held-out rating cases for synthesis against the release (round 17).

The release's `run_eval.py` / `format_checker.py` (as third parties read them): the format is invalid, and the
run rated F, as soon as one present `sct.nii.gz` fails its check (unreadable, not 3-D, not finite, another
shape); missing files do not invalidate the format. Before this round a failing output here counted only like
a missing one: F only below half the cases valid, so a run with one unreadable volume among good ones kept the
band its completion-adjusted Task reached. The spec rates "F invalid or incomplete"; missing outputs keep the
half-the-cases rule (held, README). Each case goes through `evaluate` (frozen copy, isolated evaluator, rating).
"""

from __future__ import annotations

import gzip

import pytest
from automedbench.testing import evaluate_outputs
from automedbench_synthesis import contract

TASK = "synthesis/demo"



def submission(tmp_path, perfect, change=None):
    import shutil

    source, ids = perfect
    outputs = tmp_path / "outputs"
    shutil.copytree(source, outputs)
    if change is not None:
        change(outputs / ids[-1] / contract.OUTPUT)
    return outputs


def evaluate(amb_data_root, tmp_path, outputs):
    return evaluate_outputs(TASK, data_root=amb_data_root, work=tmp_path / "work", submission=outputs)


def test_every_target_rates_a(amb_data_root, tmp_path, perfect):
    result = evaluate(amb_data_root, tmp_path, submission(tmp_path, perfect))
    assert result.task.strict == pytest.approx(1.0) and result.aggregate.rating == "A"


@pytest.mark.parametrize("damage", ["text", "gzip_of_text", "truncated"])
def test_one_present_output_failing_its_check_rates_f(amb_data_root, tmp_path, perfect, damage):
    """Five targets and one broken file: the Task keeps the five cases' credit (as the release's), the rating is
    F as the release's, whatever the Task reaches."""
    def change(path):
        data = path.read_bytes()
        path.write_bytes({"text": b"not a volume", "gzip_of_text": gzip.compress(b"not a volume" * 40),
                          "truncated": data[: len(data) // 2]}[damage])

    result = evaluate(amb_data_root, tmp_path, submission(tmp_path, perfect, change))
    n = len(perfect[1])
    assert sum(c.present for c in result.cases) == n and sum(c.valid for c in result.cases) == n - 1
    assert result.task.partial == pytest.approx((n - 1) / n, abs=1e-4)
    assert result.aggregate.rating == "F"
    assert "1 present output(s) fail the output checker" in result.aggregate.rating_reason


def test_a_missing_output_keeps_the_bands(amb_data_root, tmp_path, perfect):
    """Held: a missing file does not fail the format (the release); the rating reads the completion-adjusted Task
    on the bands (5/6 is below B here: C), F only below half the cases (the spec's "incomplete")."""
    result = evaluate(amb_data_root, tmp_path, submission(tmp_path, perfect, lambda path: path.unlink()))
    assert result.aggregate.rating == "C", result.aggregate.rating_reason


def test_an_identity_affine_scores_as_the_release(amb_data_root, tmp_path, perfect):
    """The targets' voxels saved with `np.eye(4)` (the commonest way an agent drops the header): the release checks
    the shape only and scores the array, Task 1.0, A; before, every case was refused (affine differs): Task 0, F.
    The mismatch is reported, not hidden."""
    import nibabel as nib
    import numpy as np

    def identity_header(path):
        nib.save(nib.Nifti1Image(np.asarray(nib.load(path).dataobj, np.float32), np.eye(4)), path)

    outputs = submission(tmp_path, perfect)
    for case_id in perfect[1]:
        identity_header(outputs / case_id / contract.OUTPUT)
    result = evaluate(amb_data_root, tmp_path, outputs)
    assert all(c.valid for c in result.cases)
    assert result.task.strict == pytest.approx(1.0) and result.aggregate.rating == "A"
    assert result.task.components["affine_mismatch_cases"] == len(perfect[1])
    assert all(row["affine_matches"] is False for row in result.task.per_case)
