"""Freezing submissions and the isolated evaluator: bad submissions get verdicts, never crashes."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
from automedbench.freeze import freeze
from automedbench.testing import evaluate_outputs

DEMO = "segmentation/demo"


def perfect_copy(staged, dest):
    for case in staged.case_ids:
        shutil.copytree(staged.private / case, dest / case)
    return dest


def test_freeze_rejects_symlinks_and_hashes_files(tmp_path, staged):
    src = tmp_path / "out"
    (src / "case_000").mkdir(parents=True)
    (src / "case_000" / "organ.nii.gz").write_bytes(b"abc")
    os.symlink(staged.private / "case_000" / "lesion.nii.gz", src / "case_000" / "lesion.nii.gz")
    os.symlink("/etc", src / "etc_link")
    manifest = freeze(src, tmp_path / "frozen", submitted=True)
    by_path = {f.path: f for f in manifest.files}
    assert by_path["case_000/lesion.nii.gz"].rejected.startswith("symlink")
    assert by_path["etc_link"].rejected == "symlink to /etc"  # never followed, so not told apart from a file link
    assert by_path["case_000/organ.nii.gz"].sha256 == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    assert not (tmp_path / "frozen" / "case_000" / "lesion.nii.gz").exists()
    assert not (tmp_path / "frozen" / "etc_link").exists()


@pytest.mark.parametrize("baseline,strict,rating", [("perfect", 1.0, "A"), ("empty", 0.0, "F")])  # issue 22: empty is F
def test_baselines(reg, data_root, tmp_path, baseline, strict, rating):
    result = evaluate_outputs(DEMO, baseline=baseline, data_root=data_root, work=tmp_path, registry=reg)
    assert result.task.strict == pytest.approx(strict)
    assert result.aggregate.rating == rating
    assert [s.stage for s in result.stages][-2:] == ["S4", "S5"]
    assert all(s.score is None for s in result.stages[:3])
    assert result.aggregate.overall is None  # no agent: S1–S3 are null, not 0


def test_empty_baseline_lesion_both_empty_counts_one(reg, staged, data_root, tmp_path):
    from automedbench_segmentation.io import read_case_facts

    result = evaluate_outputs(DEMO, baseline="empty", data_root=data_root, work=tmp_path, registry=reg)
    rows = {r["case_id"]: r for r in result.task.per_case}
    free = [case for case, facts in read_case_facts(staged.private).items() if not facts["lesion_present"]]
    assert len(free) == 1  # which case the staging's secret drew
    assert rows[free[0]]["lesion_dice"] == 1.0  # tumour-free case, empty prediction
    assert result.task.components["lesion_dice"] == 0.0  # but only GT-positive cases count


def test_constant_baseline_has_low_but_nonzero_organ_dice(reg, data_root, tmp_path):
    result = evaluate_outputs(DEMO, baseline="constant", data_root=data_root, work=tmp_path, registry=reg)
    organ = result.task.components["organ_dice"]
    assert 0.0 < organ < 0.1


def test_bad_submission_files_get_case_verdicts(reg, staged, data_root, tmp_path):
    import nibabel as nib

    sub = perfect_copy(staged, tmp_path / "sub")
    shutil.rmtree(sub / "case_001")  # missing case
    (sub / "case_002" / "lesion.nii.gz").write_bytes(b"not a nifti at all")  # unreadable
    os.remove(sub / "case_003" / "organ.nii.gz")
    os.symlink(staged.private / "case_003" / "organ.nii.gz", sub / "case_003" / "organ.nii.gz")  # symlink
    img = nib.load(str(sub / "case_004" / "organ.nii.gz"))
    nib.save(nib.Nifti1Image(np.zeros((10, 10, 10), np.uint8), img.affine), str(sub / "case_004" / "organ.nii.gz"))
    (sub / "notes.txt").write_text("extra")  # extra file
    result = evaluate_outputs(DEMO, submission=sub, data_root=data_root, work=tmp_path / "work", registry=reg)
    verdicts = {c.case_id: c for c in result.cases}
    assert verdicts["case_000"].valid
    assert not verdicts["case_001"].present
    assert "unreadable" in " ".join(verdicts["case_002"].reasons)
    assert "rejected at freeze (symlink" in " ".join(verdicts["case_003"].reasons)
    assert "shape (10, 10, 10)" in " ".join(verdicts["case_004"].reasons)
    assert result.task.strict == 0.0 and 0.0 < result.task.partial < 0.5
    assert result.aggregate.rating == "F"
    evaluation = (tmp_path / "work" / "evaluation.json").read_text()
    assert "notes.txt" in evaluation


def test_evaluator_ignores_agent_python_files(reg, staged, data_root, tmp_path):
    """A sitecustomize.py or module planted in the submission is never imported by the evaluator."""
    sub = perfect_copy(staged, tmp_path / "sub")
    marker = tmp_path / "PWNED"
    payload = f"open({str(marker)!r}, 'w').write('x')\n"
    for name in ("sitecustomize.py", "usercustomize.py", "numpy.py", "nibabel.py"):
        (sub / name).write_text(payload)
    # the cold path: a fresh interpreter's start-up (site, the working folder) is what a planted file could reach
    result = evaluate_outputs(DEMO, submission=sub, data_root=data_root, work=tmp_path / "work", registry=reg,
                              backend="process")
    assert not marker.exists()
    assert result.task.strict == pytest.approx(1.0)


def test_force_restage_rebuilds_and_keeps_old_on_failure(reg, tmp_path):
    from automedbench import staging

    track, task = reg.task(DEMO)
    staged = staging.stage(track, task, tmp_path)
    # each staging draws its own secret (every published file carries one timestamp, so mtimes tell nothing)
    marker = staged.private / "staging.secret"
    first = marker.read_bytes()
    staging.stage(track, task, tmp_path, force=True)
    assert marker.read_bytes() != first  # rebuilt, not skipped

    def broken(*args, **kwargs):
        raise RuntimeError("source vanished")

    before = marker.read_bytes()
    track_stage = track.stage
    try:
        track.stage = broken
        with pytest.raises(RuntimeError):
            staging.stage(track, task, tmp_path, force=True)
    finally:
        track.stage = track_stage
    assert marker.read_bytes() == before  # the old staging came back
    assert staging.load(task, tmp_path).case_ids == staged.case_ids


def test_evaluate_outputs_scores_on_the_evaluator_a_run_would(reg, data_root, tmp_path, monkeypatch,
                                                              evaluators_asked):
    """Without a backend, the test kit's evaluate_outputs scores where a run of this process would: the session's
    warm evaluator where installed (no interpreter, track and scorers started per call); with the warm evaluator
    turned off, or asked for by name, the cold process."""
    warm = "warm" in reg.components["evaluator"] and os.environ.get("AUTOMEDBENCH_WARM_EVALUATOR") != "0"
    first = evaluate_outputs(DEMO, baseline="perfect", data_root=data_root, work=tmp_path / "a", registry=reg)
    monkeypatch.setenv("AUTOMEDBENCH_WARM_EVALUATOR", "0")
    second = evaluate_outputs(DEMO, baseline="perfect", data_root=data_root, work=tmp_path / "b", registry=reg)
    monkeypatch.delenv("AUTOMEDBENCH_WARM_EVALUATOR")
    third = evaluate_outputs(DEMO, baseline="perfect", data_root=data_root, work=tmp_path / "c", registry=reg,
                             backend="process")
    assert evaluators_asked == ["warm" if warm else "process", "process", "process"]
    assert first.task.strict == second.task.strict == third.task.strict == pytest.approx(1.0)  # same verdicts
