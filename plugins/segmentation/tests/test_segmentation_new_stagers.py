"""TotalSegmentator, AeroPath and PANTHER stagers on small files written in each download's layout,
and `validate-task` passing for each of the four tasks on a 20/27-case copy of that layout."""

from __future__ import annotations

import json

import attrs
import nibabel as nib
import numpy as np
import pytest
from automedbench.api import UserError
from automedbench.testing import check_track, load_task, stage_from_folder

SHAPE = (8, 7, 6)
AFF = np.diag([0.8, 0.8, 2.5, 1.0])
TOTALSEG_CLASSES = ["spleen", "kidney_right", "kidney_left", "gallbladder", "liver", "stomach", "pancreas",
                    "adrenal_gland_right", "adrenal_gland_left", "esophagus", "aorta", "inferior_vena_cava",
                    "portal_vein_and_splenic_vein", "duodenum"]


def nii(path, data, affine=AFF):
    path.parent.mkdir(parents=True, exist_ok=True)
    img = nib.Nifti1Image(data, affine)
    img.set_data_dtype(data.dtype)
    nib.save(img, str(path))


def read(path):
    return np.asanyarray(nib.load(str(path)).dataobj)


def ct(seed):
    return np.random.default_rng(seed).integers(-1000, 1000, SHAPE).astype(np.int16)


def small(task_id, n):
    track, task = load_task(task_id)
    return track, attrs.evolve(task, case_count=n)


def manifest(staged):
    return json.loads((staged.private / "manifest.json").read_text())


def sources(staged) -> dict[str, str]:
    """The download's case id -> the staged one (drawn from the staging's secret)."""
    return {c["source_id"]: c["case_id"] for c in manifest(staged)["cases"]}


# ---------------------------------------------------------------- TotalSegmentator v2


def class_masks(liver=True):
    """One binary mask per class; the liver overlaps the spleen's corner and the duodenum the pancreas."""
    masks = {name: np.zeros(SHAPE, np.uint8) for name in TOTALSEG_CLASSES}
    masks["spleen"][0:3, 0:3, 0:3] = 1
    if liver:
        masks["liver"][2:5, 2:5, 2:5] = 1  # overlaps the spleen at [2, 2, 2]: liver (5) wins
    masks["pancreas"][5:7, 5:7, 0:2] = 1
    masks["duodenum"][6:8, 6:7, 0:2] = 1  # overlaps the pancreas at [6, 6, 0:2]: duodenum (14) wins
    masks["aorta"][7, 0, :] = 1
    for k, name in enumerate(TOTALSEG_CLASSES):  # every other class gets one voxel of its own (top slice)
        if not masks[name].any() and name != "liver":
            masks[name][k % 8, 1 + k // 8, 5] = 1
    return masks


def write_totalseg(root, subjects, meta_rows, delimiter=";"):
    for image_id, liver in subjects.items():
        nii(root / image_id / "ct.nii.gz", ct(len(image_id)))
        for name, mask in class_masks(liver).items():
            nii(root / image_id / "segmentations" / f"{name}.nii.gz", mask)
    header = delimiter.join(["image_id", "age", "gender", "institute", "study_type", "split"])
    lines = [header] + [delimiter.join([i, "60", "m", "A", "ct abdomen", split]) for i, split in meta_rows]
    (root / "meta.csv").write_text("\n".join(lines) + "\n")


def test_totalsegmentator_test_split_only_and_painted_in_label_order(tmp_path):
    src = tmp_path / "Totalsegmentator_dataset_v201"
    subjects = {"s0001": True, "s0002": True, "s0010": False, "s0011": True, "s0003": True}
    write_totalseg(src, subjects, [("s0001", "train"), ("s0002", "test"), ("s0010", "test"), ("s0011", "test"),
                                   ("s0003", "val")])
    track, task = small("segmentation/totalsegmentator", 2)
    staged = stage_from_folder(track, task, tmp_path / "root", tmp_path)  # the release folder one level down
    found, drawn = manifest(staged), sources(staged)
    assert set(drawn) == {"s0002", "s0011"}  # train/val never staged
    assert found["skipped"] in ([], [{"source_id": "s0010", "reason": "empty liver"}])
    labels = read(staged.private / drawn["s0002"] / "labels.nii.gz")
    masks = class_masks()
    expected = np.zeros(SHAPE, np.uint8)
    for k, name in enumerate(TOTALSEG_CLASSES, start=1):
        expected[masks[name] > 0] = k
    assert np.array_equal(labels, expected)
    assert labels[2, 2, 2] == 5 and labels[6, 6, 0] == 14 and labels[0, 0, 0] == 1 and labels[7, 0, 3] == 11
    assert np.array_equal(read(staged.public / drawn["s0002"] / "ct.nii.gz"), ct(len("s0002")))


def test_totalsegmentator_meta_problems_get_one_line(tmp_path):
    src = tmp_path / "ts"
    write_totalseg(src, {"s0001": True}, [("s0001", "test")], delimiter=",")
    track, task = small("segmentation/totalsegmentator", 1)
    with pytest.raises(UserError, match=r"needs columns image_id and split.*comma-separated"):
        stage_from_folder(track, task, tmp_path / "root", src)
    write_totalseg(src, {"s0001": True}, [("s0001", "train")])
    with pytest.raises(UserError, match="no subject has split 'test'"):
        stage_from_folder(track, task, tmp_path / "root", src)
    (src / "s0001" / "segmentations" / "duodenum.nii.gz").unlink()
    write_totalseg(src, {}, [("s0001", "test")])
    with pytest.raises(UserError, match=r"1 x missing segmentations/duodenum.nii.gz"):
        stage_from_folder(track, task, tmp_path / "root", src)
    with pytest.raises(UserError, match=r"no TotalSegmentator meta\.csv"):
        stage_from_folder(track, task, tmp_path / "root", src / "s0001")


# ---------------------------------------------------------------- AeroPath


def airway(seed):
    mask = np.zeros(SHAPE, np.uint8)
    mask[3:5, 3:5, :] = 255  # stored as 0/255: binarised to label 1
    mask[seed % 4, 0, 0] = 255
    return mask


def write_aeropath(root, numbers, missing_label=()):
    for n in numbers:
        nii(root / str(n) / f"{n}_CT_HR.nii.gz", ct(n))
        if n not in missing_label:
            nii(root / str(n) / f"{n}_CT_HR_label_airways.nii.gz", airway(n))
        nii(root / str(n) / f"{n}_CT_HR_label_lungs.nii.gz", np.ones(SHAPE, np.uint8))


def test_aeropath_binarised_airway(tmp_path):
    write_aeropath(tmp_path / "hf" / "data", [1, 2, 10, 3], missing_label=(2,))
    track, task = small("segmentation/aeropath", 3)
    staged = stage_from_folder(track, task, tmp_path / "root", tmp_path / "hf")
    found, drawn = manifest(staged), sources(staged)
    assert set(drawn) == {"1", "3", "10"}
    assert found["skipped"] in ([], [{"source_id": "2", "reason": "missing 2_CT_HR_label_airways.nii.gz"}])
    mask = read(staged.private / drawn["10"] / "airway.nii.gz")
    assert mask.dtype == np.uint8 and np.array_equal(mask, (airway(10) > 0).astype(np.uint8))
    assert sorted(p.name for p in (staged.public / drawn["1"]).iterdir()) == ["ct.nii.gz"]  # no lung label


def test_aeropath_wrong_layout(tmp_path):
    (tmp_path / "AeroPath" / "notes").mkdir(parents=True)
    track, task = small("segmentation/aeropath", 1)
    with pytest.raises(UserError, match=r"no AeroPath cases; expected <n>/<n>_CT_HR.nii.gz"):
        stage_from_folder(track, task, tmp_path / "root", tmp_path)


# ---------------------------------------------------------------- PANTHER


def panther_label(tumour=True, extra=None):
    lab = np.zeros(SHAPE[::-1], np.uint8)  # (z, y, x) for SimpleITK
    lab[1:4, 2:6, 2:7] = 2
    if tumour:
        lab[2:3, 3:5, 3:5] = 1
    if extra is not None:
        lab[0, 0, 0] = extra
    return lab


def write_mha(path, array_zyx, spacing=(0.8, 0.8, 2.5), origin=(10.0, -20.0, 5.0)):
    sitk = pytest.importorskip("SimpleITK")  # here, not at collection: the import is slow, few tests need it
    image = sitk.GetImageFromArray(array_zyx)
    image.SetSpacing(spacing)
    image.SetOrigin(origin)
    path.parent.mkdir(parents=True, exist_ok=True)
    sitk.WriteImage(image, str(path))


def write_panther(root, stems, task1, no_tumour=(), unannotated=(), extra=None):
    for i, stem in enumerate(stems):
        sid = f"{stem}_0001" if task1 else stem
        write_mha(root / "ImagesTr" / f"{sid}_0000.mha", ct(i).transpose(2, 1, 0).copy())
        if stem not in unannotated:
            write_mha(root / "LabelsTr" / f"{sid}.mha", panther_label(stem not in no_tumour, extra))


@pytest.mark.parametrize("task1", [True, False])
def test_panther_converts_mha_and_keeps_geometry(tmp_path, task1):
    src = tmp_path / ("PANTHER_Task1" if task1 else "PANTHER_Task2")
    write_panther(src, ["10002", "10000", "10001", "10003"], task1, no_tumour=("10001",), unannotated=("10000",))
    task_id = "segmentation/panther-t1" if task1 else "segmentation/panther-t2"
    track, task = small(task_id, 2)
    staged = stage_from_folder(track, task, tmp_path / "root", tmp_path)
    found, drawn = manifest(staged), sources(staged)
    suffix = "_0001" if task1 else ""
    assert set(drawn) == {f"10002{suffix}", f"10003{suffix}"}
    assert {s["reason"] for s in found["skipped"]} <= {f"missing LabelsTr/10000{suffix}.mha (unannotated)",
                                                       "empty pancreatic tumour"}
    assert all(src.endswith(".mha") for c in found["cases"] for src in c["source_files"])
    case = staged.private / drawn[f"10002{suffix}"]
    labels = read(case / "labels.nii.gz")
    assert np.array_equal(labels, panther_label().transpose(2, 1, 0))
    image = nib.load(str(staged.public / case.name / task.input_files[0]))
    assert np.array_equal(np.asanyarray(image.dataobj), ct(0).astype(np.int16))
    expected = np.diag([-0.8, -0.8, 2.5, 1.0])
    expected[:3, 3] = [-10.0, 20.0, 5.0]  # LPS origin (10, -20, 5) in RAS
    assert np.allclose(image.affine, expected) and np.allclose(nib.load(str(case / "labels.nii.gz")).affine, expected)
    assert not (staged.root / ".incoming").exists()
    again = stage_from_folder(track, task, tmp_path / "root", tmp_path)  # a new staging draws new ids
    assert set(sources(again)) == set(drawn) and not set(again.case_ids) & set(staged.case_ids)


def test_panther_refuses_another_label_scheme(tmp_path):
    write_panther(tmp_path / "p", ["10000"], task1=False, extra=4)
    track, task = small("segmentation/panther-t2", 1)
    with pytest.raises(UserError, match=r"10000.mha: label values 4 are not PANTHER's"):
        stage_from_folder(track, task, tmp_path / "root", tmp_path / "p")
    assert not (tmp_path / "root" / task.id / "private").exists()
    with pytest.raises(UserError, match=r"not a PANTHER folder; expected ImagesTr/<id>_0000.mha"):
        stage_from_folder(track, task, tmp_path / "root", tmp_path / "root")


# ---------------------------------------------------------------- validate-task on a full-size layout


def full_layout(task_id, src):
    if task_id == "segmentation/totalsegmentator":
        ids = [f"s{i:04d}" for i in range(22)]
        write_totalseg(src, dict.fromkeys(ids, True), [(i, "test" if n != 3 else "train") for n, i in enumerate(ids)])
    elif task_id == "segmentation/aeropath":
        write_aeropath(src, range(1, 28))
    else:
        write_panther(src, [str(10000 + i) for i in range(20)], task1=task_id.endswith("t1"))


@pytest.mark.slow  # each evaluates three baselines on 20+ cases with surface metrics (about a minute under load)
@pytest.mark.parametrize("task_id", ["segmentation/totalsegmentator", "segmentation/aeropath",
                                     "segmentation/panther-t1", "segmentation/panther-t2"])
def test_validate_task_passes(tmp_path, task_id):
    full_layout(task_id, tmp_path / "download")
    track, task = load_task(task_id)
    stage_from_folder(track, task, tmp_path / "root", tmp_path / "download")
    ok, report = check_track(task_id, tmp_path / "root")
    assert ok, report
    assert f"{task.case_count} staged, {task.case_count} declared" in report
    assert "perfect baseline scores 1.0 / A" in report


# ---------------------------------------------------------------- crafted downloads


def test_a_case_folder_symlinked_out_of_the_download_is_refused(tmp_path):
    # AeroPath case 3 is a symlink to a folder elsewhere (say, someone else's data): never read, never published
    write_aeropath(tmp_path / "hf" / "data", [1, 2])
    write_aeropath(tmp_path / "elsewhere", [3])
    (tmp_path / "hf" / "data" / "3").symlink_to(tmp_path / "elsewhere" / "3")
    track, task = small("segmentation/aeropath", 3)
    with pytest.raises(UserError, match="symlink"):
        stage_from_folder(track, task, tmp_path / "root", tmp_path / "hf")
    assert not list((tmp_path / "root").rglob("*.nii.gz"))


def test_a_nifti_declaring_more_voxels_than_memory_is_refused_before_decoding(tmp_path):
    write_aeropath(tmp_path / "hf" / "data", [1, 2, 3])
    path = tmp_path / "hf" / "data" / "2" / "2_CT_HR.nii.gz"
    header = nib.Nifti1Header()
    header.set_data_shape((4096, 4096, 4096))  # 128 GiB of int16 declared in a 348-byte header
    header.set_data_dtype(np.int16)
    import gzip

    path.write_bytes(gzip.compress(header.binaryblock + b"\0" * 4 + b"\0" * 64))
    track, task = small("segmentation/aeropath", 3)
    with pytest.raises(UserError, match="image header declares 4096x4096x4096"):
        stage_from_folder(track, task, tmp_path / "root", tmp_path / "hf")
