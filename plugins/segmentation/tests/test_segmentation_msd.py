"""The one Medical Segmentation Decathlon stager (Liver, Colon, HepaticVessel, Spleen, Heart, Prostate) on
small downloads written in code: dataset.json checks, channel splitting, hostile files, validate-task."""

from __future__ import annotations

import gzip
import json
import shutil

import attrs
import nibabel as nib
import numpy as np
import pytest
from automedbench.api import UserError
from automedbench.testing import check_track, load_task, sampled, stage_from_folder

SHAPE = (16, 14, 12)  # the labels fill about 3 %: an all-foreground mask stays far below B, as on real scans
AFF = np.diag([0.8, 0.8, 2.5, 1.0])

# task id -> (folder, file prefix, dataset.json labels, modality)
MSD = {
    "segmentation/liver": ("Task03_Liver", "liver", {"1": "liver", "2": "cancer"}, {"0": "CT"}),
    "segmentation/colon": ("Task10_Colon", "colon", {"1": "colon cancer primaries"}, {"0": "CT"}),
    "segmentation/hepaticvessel": ("Task08_HepaticVessel", "hepaticvessel", {"1": "Vessel", "2": "Tumour"},
                                   {"0": "CT"}),
    "segmentation/spleen": ("Task09_Spleen", "spleen", {"1": "spleen"}, {"0": "CT"}),
    "segmentation/heart": ("Task02_Heart", "la", {"1": "left atrium"}, {"0": "MRI"}),
    "segmentation/prostate": ("Task05_Prostate", "prostate", {"1": "PZ", "2": "TZ"}, {"0": "T2", "1": "ADC"}),
}


def nii(path, data, affine=AFF):
    path.parent.mkdir(parents=True, exist_ok=True)
    img = nib.Nifti1Image(data, affine)
    img.set_data_dtype(data.dtype)
    nib.save(img, str(path))


def read(path):
    return np.asanyarray(nib.load(str(path)).dataobj)


def image(seed, channels=1):
    rng = np.random.default_rng(seed)
    data = rng.integers(-1000, 1000, (*SHAPE, channels) if channels > 1 else SHAPE)
    return data.astype(np.int16)


def labels(n_labels, seed, empty_last=False):
    """Label 1 (plus a voxel that differs per case) and label 2 in two-label tasks; `empty_last` leaves out
    the task's required label (label 2, or everything in one-label tasks)."""
    lab = np.zeros(SHAPE, np.uint8)
    lab[1:6, 1:5, 1:5] = 1
    lab[seed % 8, 6, 5] = 1
    if n_labels >= 2 and not empty_last:
        lab[3:5, 2:4, 2:4] = 2
    if n_labels == 1 and empty_last:
        lab[:] = 0
    return lab


def write_msd(src, task_id, numbers, *, empty=(), dataset_json=True, json_labels=None):
    folder, prefix, names, modality = MSD[task_id]
    root = src / folder
    n_labels, channels = len(names), len(modality)
    for n in numbers:
        name = f"{prefix}_{n:03d}" if prefix != "spleen" else f"{prefix}_{n}"
        nii(root / "imagesTr" / f"{name}.nii.gz", image(n, channels))
        nii(root / "labelsTr" / f"{name}.nii.gz", labels(n_labels, n, empty_last=n in empty))
    (root / "imagesTs").mkdir(exist_ok=True)
    (root / "imagesTr" / f"._{prefix}_000.nii.gz").write_bytes(b"\x00\x05\x16\x07 AppleDouble")
    if dataset_json:
        files = sorted(p.name for p in (root / "imagesTr").glob(f"{prefix}_*.nii.gz"))
        doc = {"name": folder.split("_", 1)[1], "tensorImageSize": "4D" if channels > 1 else "3D",
               "modality": modality, "labels": {"0": "background", **(json_labels or names)},
               "numTraining": len(files), "numTest": 0,
               "training": [{"image": f"./imagesTr/{f}", "label": f"./labelsTr/{f}"} for f in files], "test": []}
        (root / "dataset.json").write_text(json.dumps(doc, indent=4))
    return root


def small(task_id, n):
    track, task = load_task(task_id)
    return track, attrs.evolve(task, case_count=n)


def manifest(staged):
    return json.loads((staged.private / "manifest.json").read_text())


def sources(staged) -> dict[str, str]:
    """The download's case id -> the staged one (drawn from the staging's secret)."""
    return {c["source_id"]: c["case_id"] for c in manifest(staged)["cases"]}


@pytest.mark.parametrize("task_id", sorted(MSD))
def test_each_msd_task_stages_its_layout(tmp_path, task_id):
    write_msd(tmp_path / "dl", task_id, [10, 2, 1, 3], empty=(2,))  # case 2 lacks the required label
    track, task = small(task_id, 3)
    staged = stage_from_folder(track, task, tmp_path / "root", tmp_path / "dl")
    found = manifest(staged)
    _, _, names, modality = MSD[task_id]
    drawn = sources(staged)
    assert sorted(int(s.rsplit("_", 1)[1]) for s in drawn) == [1, 3, 10]  # case 2 lacks the label: never staged
    assert all(int(s["source_id"].rsplit("_", 1)[1]) == 2 for s in found["skipped"])
    source = next(s for s in drawn if int(s.rsplit("_", 1)[1]) == 10)
    case = staged.public / drawn[source]
    if len(modality) == 1:  # the same voxels and grid, never the download's bytes
        src = tmp_path / "dl" / MSD[task_id][0] / "imagesTr" / f"{source}.nii.gz"
        published = case / task.input_files[0]
        assert published.read_bytes() != src.read_bytes()
        assert np.array_equal(read(published), read(src))
        assert np.allclose(nib.load(str(published)).affine, nib.load(str(src)).affine)
    else:  # channels split onto the same grid
        four_d = image(10, 2)
        for k, name in enumerate(task.input_files):
            assert np.array_equal(read(case / name), four_d[..., k])
            assert np.allclose(nib.load(str(case / name)).affine, AFF)
    ref = read(staged.private / drawn[source] / task.output_files[0])
    if task_id != "segmentation/liver":
        assert np.array_equal(ref, labels(len(names), 10))
    assert not (staged.root / ".incoming").exists()
    again = stage_from_folder(track, task, tmp_path / "root", tmp_path / "dl")
    assert set(sources(again)) == set(drawn) and not set(again.case_ids) & set(staged.case_ids)


def test_without_dataset_json_the_folder_is_globbed(tmp_path):
    write_msd(tmp_path, "segmentation/spleen", [12, 3], dataset_json=False)
    track, task = small("segmentation/spleen", 2)
    staged = stage_from_folder(track, task, tmp_path / "root", tmp_path)  # the parent of Task09_Spleen
    assert set(sources(staged)) == {"spleen_3", "spleen_12"}


def test_another_decathlon_task_is_refused_by_its_labels(tmp_path):
    root = write_msd(tmp_path, "segmentation/spleen", [1, 2])
    shutil.copytree(root, root.parent / "Task10_Colon")  # a misnamed folder: dataset.json tells the truth
    track, task = small("segmentation/colon", 1)
    with pytest.raises(UserError, match=r"labels \['spleen'\] are not Task10_Colon's \['colon cancer primaries'\]"):
        stage_from_folder(track, task, tmp_path / "root", tmp_path)


def test_prostate_channel_count_checked(tmp_path):
    root = write_msd(tmp_path, "segmentation/prostate", [1, 2])
    doc = json.loads((root / "dataset.json").read_text())
    doc["modality"] = {"0": "T2"}
    (root / "dataset.json").write_text(json.dumps(doc))
    track, task = small("segmentation/prostate", 1)
    with pytest.raises(UserError, match=r"1 image channel\(s\) \['T2'\], Task05_Prostate has 2 \(T2, ADC\)"):
        stage_from_folder(track, task, tmp_path / "root", tmp_path)
    doc["modality"] = {"0": "T2", "1": "ADC"}
    (root / "dataset.json").write_text(json.dumps(doc))
    nii(root / "imagesTr" / "prostate_001.nii.gz", image(1, 1))  # 3-D where two channels are due: skipped
    staged = stage_from_folder(track, task, tmp_path / "root", tmp_path)
    assert list(sources(staged)) == ["prostate_002"]
    skipped = manifest(staged)["skipped"]
    assert all(s["source_id"] == "prostate_001" and "expected 3-D x 2 channels" in s["reason"] for s in skipped)


def test_missing_folders_and_empty_download_get_one_line(tmp_path):
    nii(tmp_path / "Task09_Spleen" / "imagesTr" / "spleen_1.nii.gz", image(1))
    track, task = small("segmentation/spleen", 1)
    with pytest.raises(UserError, match=r"not an MSD Task09_Spleen folder; missing labelsTr/ \(expected dataset.json"):
        stage_from_folder(track, task, tmp_path / "root", tmp_path)
    (tmp_path / "Task09_Spleen" / "labelsTr").mkdir()
    (tmp_path / "Task09_Spleen" / "imagesTr" / "spleen_1.nii.gz").unlink()
    with pytest.raises(UserError, match=r"imagesTr: no spleen_N.nii.gz images"):
        stage_from_folder(track, task, tmp_path / "root", tmp_path)


# ---------------------------------------------------------------- hostile downloads


@pytest.mark.parametrize("entry", ["../../etc/passwd", "./imagesTr/../../x.nii.gz", "/abs/spleen_1.nii.gz",
                                   "./labelsTr/spleen_1.nii.gz"])
def test_training_paths_must_stay_in_imagesTr(tmp_path, entry):
    root = write_msd(tmp_path, "segmentation/spleen", [1])
    doc = json.loads((root / "dataset.json").read_text())
    doc["training"].append({"image": entry, "label": entry})
    (root / "dataset.json").write_text(json.dumps(doc))
    track, task = small("segmentation/spleen", 1)
    with pytest.raises(UserError, match=r"dataset.json: training entry .* is not ./imagesTr/<name>.nii.gz"):
        stage_from_folder(track, task, tmp_path / "root", tmp_path)


def test_symlinked_volume_and_dataset_json_are_refused(tmp_path):
    root = write_msd(tmp_path, "segmentation/spleen", [1, 2])
    secret = tmp_path / "secret.nii.gz"
    nii(secret, image(7))
    target = root / "imagesTr" / "spleen_1.nii.gz"
    target.unlink()
    target.symlink_to(secret)
    track, task = small("segmentation/spleen", 2)
    refused = r"spleen_1.nii.gz(: cannot be read as a regular file|: a symlink|.* passes through a symlink)"
    with pytest.raises(UserError, match=refused):
        stage_from_folder(track, task, tmp_path / "root", tmp_path)
    assert not (tmp_path / "root" / task.id / "public").exists()
    target.unlink()
    nii(target, image(1))
    (tmp_path / "elsewhere.json").write_text((root / "dataset.json").read_text())
    (root / "dataset.json").unlink()
    (root / "dataset.json").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(UserError, match=r"dataset.json: (cannot be read as a regular file|a symlink)"):
        stage_from_folder(track, task, tmp_path / "root", tmp_path)


def test_oversized_and_bomb_volumes_and_deep_json_are_refused(tmp_path, monkeypatch):
    from automedbench_segmentation.data import msd

    root = write_msd(tmp_path, "segmentation/spleen", [1, 2])
    track, task = small("segmentation/spleen", 2)  # both cases are needed: the crafted one is read
    monkeypatch.setattr(msd, "VOLUME_MAX_BYTES", 200_000)
    big = np.zeros((64, 64, 64), np.int16)  # 512 kB raw, a few hundred bytes compressed: a small bomb
    nii(root / "imagesTr" / "spleen_1.nii.gz", big)
    with pytest.raises(UserError, match=r"spleen_1.nii.gz: decompresses past 200000 bytes"):
        stage_from_folder(track, task, tmp_path / "root", tmp_path)
    (root / "imagesTr" / "spleen_1.nii.gz").write_bytes(gzip.compress(np.random.default_rng(0).bytes(300_000)))
    with pytest.raises(UserError, match=r"spleen_1.nii.gz: 3\d+ bytes, larger than 200000"):
        stage_from_folder(track, task, tmp_path / "root", tmp_path)
    (root / "dataset.json").write_text("[" * 500 + "]" * 500)
    with pytest.raises(UserError, match=r"dataset.json: JSON nested deeper than"):
        stage_from_folder(track, task, tmp_path / "root", tmp_path)


def test_corrupt_volume_is_skipped_with_its_reason(tmp_path):
    root = write_msd(tmp_path, "segmentation/spleen", [1, 2])
    (root / "imagesTr" / "spleen_1.nii.gz").write_bytes(gzip.compress(b"not a nifti header" * 30))
    track, task = small("segmentation/spleen", 1)
    staged = stage_from_folder(track, task, tmp_path / "root", tmp_path)
    assert list(sources(staged)) == ["spleen_2"]
    for skipped in manifest(staged)["skipped"]:  # tried before spleen_2 or not, by the secret order
        assert skipped["source_id"] == "spleen_1"
        assert skipped["reason"].startswith("spleen_1.nii.gz: not a readable NIfTI-1 volume (")
    with pytest.raises(UserError, match=r"only 1 of the 2 cases .* spleen_1.nii.gz: not a readable NIfTI-1"):
        stage_from_folder(track, attrs.evolve(task, case_count=2), tmp_path / "root2", tmp_path)


# ---------------------------------------------------------------- validate-task on a 20-case copy of each layout


@pytest.mark.slow  # each stages 22 cases and evaluates three baselines with surface metrics
@pytest.mark.parametrize("task_id", sampled(["segmentation/spleen", "segmentation/colon", "segmentation/hepaticvessel",
                                             "segmentation/heart", "segmentation/prostate"]))
def test_validate_task_passes(tmp_path, task_id):
    write_msd(tmp_path / "download", task_id, range(1, 23), empty=(5,))
    track, task = load_task(task_id)
    stage_from_folder(track, task, tmp_path / "root", tmp_path / "download")
    ok, report = check_track(task_id, tmp_path / "root")
    assert ok, report
    assert f"{task.case_count} staged, {task.case_count} declared" in report
    assert "perfect baseline scores 1.0 / A" in report
