"""Stagers on small volumes written in each dataset's official download layout."""

from __future__ import annotations

import json
import re

import attrs
import nibabel as nib
import numpy as np
import pytest
from automedbench.api import UserError
from automedbench.testing import run_cli, stage_from_folder

SHAPE = (8, 7, 6)
AFF = np.diag([0.8, 0.8, 2.5, 1.0])


def nii(path, data, affine=AFF):
    path.parent.mkdir(parents=True, exist_ok=True)
    img = nib.Nifti1Image(data, affine)
    img.set_data_dtype(data.dtype)
    nib.save(img, str(path))


def ct(seed):
    return np.random.default_rng(seed).integers(-1000, 1000, SHAPE).astype(np.int16)


def label_map(tumour, extra=0):
    lab = np.zeros(SHAPE, np.uint8)
    lab[2:6, 2:5, 1:5] = 1
    if tumour:
        lab[3:5, 3:4, 2:4] = 2
    if extra:
        lab[0, 0, 0] = extra
    return lab


def small(amb_registry, task_id, n):
    track, task = amb_registry.task(task_id)
    return track, attrs.evolve(task, case_count=n)


def read(path):
    return np.asanyarray(nib.load(str(path)).dataobj)


def sources(staged) -> dict[str, str]:
    """The download's case id -> the staged one (drawn from the staging's secret), from private/manifest.json."""
    manifest = json.loads((staged.private / "manifest.json").read_text())
    return {c["source_id"]: c["case_id"] for c in manifest["cases"]}


# ---------------------------------------------------------------- KiTS19


@pytest.fixture()
def kits(tmp_path):
    src = tmp_path / "kits19"
    for i, tumour in enumerate([True, False, True, True]):
        case = src / "data" / f"case_{i:05d}"
        nii(case / "imaging.nii.gz", ct(i))
        nii(case / "segmentation.nii.gz", label_map(tumour))
    nii(src / "data" / "case_00300" / "imaging.nii.gz", ct(9))  # a test case: no segmentation
    return src


def test_kits19_tumour_cases_drawn_secretly(amb_registry, kits, tmp_path):
    track, task = small(amb_registry, "segmentation/kidney", 2)
    staged = stage_from_folder(track, task, tmp_path / "root", kits)
    assert len(staged.case_ids) == 2 and all(re.fullmatch(r"kidney_[0-9a-f]{8}", c) for c in staged.case_ids)
    drawn = sources(staged)
    assert set(drawn) <= {"case_00000", "case_00002", "case_00003"}  # case 1 has no tumour, case 300 no labels
    manifest = json.loads((staged.private / "manifest.json").read_text())
    assert {(s["source_id"], s["reason"]) for s in manifest["skipped"]} <= {
        ("case_00001", "no tumour"), ("case_00300", "missing segmentation.nii.gz")}
    source, case_id = sorted(drawn.items())[0]
    src_lab = label_map(True)
    case = staged.private / case_id
    organ, lesion = read(case / "organ.nii.gz"), read(case / "lesion.nii.gz")
    assert np.array_equal(organ, (src_lab > 0).astype(np.uint8))
    assert np.array_equal(lesion, (src_lab == 2).astype(np.uint8))
    published = staged.public / case_id / "ct.nii.gz"
    assert np.array_equal(read(published), ct(int(source[-5:])))  # the same voxels ...
    assert published.read_bytes() != (kits / "data" / source / "imaging.nii.gz").read_bytes()  # ... not its bytes
    assert np.allclose(nib.load(str(published)).affine, AFF)
    assert np.allclose(nib.load(str(case / "organ.nii.gz")).affine, AFF)
    facts = json.loads((staged.private / "cases.json").read_text())
    assert facts == {c: {"lesion_present": True} for c in staged.case_ids}
    assert sorted(p.name for p in staged.public.rglob("*") if p.is_file()) == ["ct.nii.gz", "ct.nii.gz"]


def test_restaging_draws_anew_and_leaves_nothing_behind(amb_registry, kits, tmp_path):
    track, task = small(amb_registry, "segmentation/kidney", 2)
    root = tmp_path / "root"
    staged = stage_from_folder(track, task, root, kits)
    again = stage_from_folder(track, task, root, kits)
    assert not set(staged.case_ids) & set(again.case_ids)
    assert sorted(p.name for p in again.public.iterdir()) == again.case_ids
    nii(kits / "data" / "case_00000" / "segmentation.nii.gz", label_map(False))  # case 0 loses its tumour
    changed = stage_from_folder(track, task, root, kits)
    assert set(sources(changed)) == {"case_00002", "case_00003"}
    assert not (root / task.id / ".incoming").exists()


def test_kits19_not_enough_cases_names_the_reasons(amb_registry, kits, tmp_path):
    track, task = small(amb_registry, "segmentation/kidney", 5)
    with pytest.raises(UserError, match=r"only 3 of the 5 cases .* 1 x (no tumour|missing segmentation.nii.gz); "
                                        r"1 x (no tumour|missing segmentation.nii.gz)"):
        stage_from_folder(track, task, tmp_path / "root", kits)
    assert not (tmp_path / "root" / task.id / "public").exists()  # nothing half-staged


def test_kits19_wrong_layout(amb_registry, tmp_path):
    track, task = small(amb_registry, "segmentation/kidney", 2)
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match=r"no KiTS19 case folders; expected case_XXXXX/imaging\.nii\.gz"):
        stage_from_folder(track, task, tmp_path / "root", tmp_path / "empty")


def test_kits19_bad_labels_and_grid_are_skipped(amb_registry, kits, tmp_path):
    nii(kits / "data" / "case_00000" / "segmentation.nii.gz", label_map(True, extra=5))
    nii(kits / "data" / "case_00002" / "segmentation.nii.gz", np.zeros((8, 7, 5), np.uint8))
    nii(kits / "data" / "case_00003" / "segmentation.nii.gz", label_map(True), np.diag([1.0, 1.0, 1.0, 1.0]))
    nii(kits / "data" / "case_00004" / "imaging.nii.gz", ct(4))
    nii(kits / "data" / "case_00004" / "segmentation.nii.gz", label_map(True))
    track, task = small(amb_registry, "segmentation/kidney", 1)
    staged = stage_from_folder(track, task, tmp_path / "root", kits)
    assert list(sources(staged)) == ["case_00004"]  # the one usable case, wherever the secret order put it
    from automedbench_segmentation.data.layouts import find_kits19
    from automedbench_segmentation.data.stagers import _qualify

    reasons = {c.source_id: _qualify(task, c)[3] for c in find_kits19(kits) if not c.problem}
    assert reasons == {"case_00000": "labels [5] beyond 0-2", "case_00001": "no tumour",
                       "case_00002": "reference shape (8, 7, 5) != image shape (8, 7, 6)",
                       "case_00003": "segmentation.nii.gz: affine differs from the image's", "case_00004": ""}


# ---------------------------------------------------------------- MSD Task03 Liver


def test_msd_liver_numeric_order_and_resource_forks(amb_registry, tmp_path):
    root = tmp_path / "Task03_Liver"
    for n in (10, 2, 1):
        nii(root / "imagesTr" / f"liver_{n}.nii.gz", ct(n))
        nii(root / "labelsTr" / f"liver_{n}.nii.gz", label_map(tumour=n != 1))
    (root / "imagesTr" / "._liver_0.nii.gz").write_bytes(b"\x00\x05\x16\x07 AppleDouble")
    track, task = small(amb_registry, "segmentation/liver", 2)
    staged = stage_from_folder(track, task, tmp_path / "data", tmp_path)  # the parent of Task03_Liver works too
    drawn = sources(staged)
    assert set(drawn) == {"liver_2", "liver_10"}  # liver_1 has no tumour, the resource fork is no case
    assert np.array_equal(read(staged.public / drawn["liver_10"] / "ct.nii.gz"), ct(10))


def test_msd_missing_labels_folder(amb_registry, tmp_path):
    nii(tmp_path / "imagesTr" / "liver_0.nii.gz", ct(0))
    track, task = small(amb_registry, "segmentation/liver", 1)
    with pytest.raises(UserError, match=r"not an MSD Task03_Liver folder; missing labelsTr/"):
        stage_from_folder(track, task, tmp_path / "data", tmp_path)


# ---------------------------------------------------------------- PanTS


def pants_case(root, case_id, tumour, split="Tr", structures=("pancreas", "pancreatic_lesion")):
    nii(root / f"Image{split}" / case_id / "ct.nii.gz", ct(len(case_id)))
    seg = root / f"Label{split}" / case_id / "segmentations"
    pancreas = np.zeros(SHAPE, np.uint8)
    pancreas[2:6, 2:5, 1:5] = 1
    lesion = np.zeros(SHAPE, np.uint8)
    if tumour:
        lesion[1:3, 2:4, 2:3] = 1  # partly outside the pancreas mask: the organ is pancreas or lesion
    masks = {"pancreas": pancreas, "pancreatic_lesion": lesion}
    for i, name in enumerate(structures):
        if name not in masks:
            m = np.zeros(SHAPE, np.uint8)
            m[i % 8, :, 0] = 1
            masks[name] = m
    for name in structures:
        nii(seg / f"{name}.nii.gz", masks[name])
    return masks


def test_pants_organ_lesion(amb_registry, tmp_path):
    src = tmp_path / "PanTS" / "data"
    pants_case(src, "PanTS_00000001", tumour=False)
    masks = pants_case(src, "PanTS_00000002", tumour=True)
    pants_case(src, "PanTS_00009001", tumour=True, split="Te")
    track, task = small(amb_registry, "segmentation/pancreas", 2)
    staged = stage_from_folder(track, task, tmp_path / "root", tmp_path / "PanTS")
    drawn = sources(staged)
    assert set(drawn) == {"PanTS_00000002", "PanTS_00009001"}
    organ = read(staged.private / drawn["PanTS_00000002"] / "organ.nii.gz")
    assert np.array_equal(organ, (masks["pancreas"] | masks["pancreatic_lesion"]).astype(np.uint8))
    lesion = read(staged.private / drawn["PanTS_00000002"] / "lesion.nii.gz")
    assert np.array_equal(lesion, masks["pancreatic_lesion"])


def test_pants_missing_lesion_file_and_npz_release(amb_registry, tmp_path):
    src = tmp_path / "PanTS"
    pants_case(src, "PanTS_00000001", tumour=True, structures=("pancreas",))
    (src / "ImageTr" / "PanTS_00000002").mkdir(parents=True)
    (src / "ImageTr" / "PanTS_00000002" / "ct.npz").write_bytes(b"")
    track, task = small(amb_registry, "segmentation/pancreas", 1)
    with pytest.raises(UserError) as info:
        stage_from_folder(track, task, tmp_path / "root", src)
    assert "missing segmentations/pancreatic_lesion.nii.gz" in str(info.value)
    assert "convert the NumPy release to NIfTI" in str(info.value)


def test_pants_multilabel_paints_in_label_order(amb_registry, tmp_path):
    track, task = small(amb_registry, "segmentation/pancreas-oar", 1)
    names = sorted({n for group in task.params["structures"].values() for n in group})
    src = tmp_path / "PanTS"
    pants_case(src, "PanTS_00000001", tumour=True, structures=("pancreas",))  # incomplete: skipped
    masks = pants_case(src, "PanTS_00000002", tumour=True, structures=tuple(names))
    staged = stage_from_folder(track, task, tmp_path / "root", src)
    case = sources(staged)["PanTS_00000002"]
    labels = read(staged.private / case / "labels.nii.gz")
    expected = np.zeros(SHAPE, np.uint8)
    for k, group in sorted((int(k), g) for k, g in task.params["structures"].items()):
        for name in group:
            expected[masks[name] > 0] = k
    assert np.array_equal(labels, expected)
    assert labels[1, 2, 2] == 2  # lesion painted over the pancreas where they overlap
    facts = json.loads((staged.private / "cases.json").read_text())[case]
    assert facts["lesion_present"] is True and facts["labels_present"] == sorted(set(np.unique(expected)) - {0})


# ---------------------------------------------------------------- FeTA


def feta_subject(root, sub, labels):
    anat = root / sub / "anat"
    nii(anat / f"{sub}_rec-mial_T2w.nii.gz", ct(int(sub[-3:])).astype(np.float32))
    if labels is not None:
        nii(anat / f"{sub}_rec-mial_dseg.nii.gz", labels)


def test_feta_nested_release(amb_registry, tmp_path):
    src = tmp_path / "feta_2.1"
    tissues = np.arange(np.prod(SHAPE), dtype=np.uint8).reshape(SHAPE) % 8
    feta_subject(src, "sub-002", tissues)
    feta_subject(src, "sub-001", None)
    feta_subject(src, "sub-010", tissues)
    track, task = small(amb_registry, "segmentation/feta", 2)
    staged = stage_from_folder(track, task, tmp_path / "root", tmp_path)  # subjects one folder below
    manifest = json.loads((staged.private / "manifest.json").read_text())
    drawn = sources(staged)
    assert set(drawn) == {"sub-002", "sub-010"}
    assert manifest["skipped"] in ([], [{"source_id": "sub-001", "reason": "missing anat/*_dseg.nii.gz"}])
    assert np.array_equal(read(staged.private / drawn["sub-002"] / "dseg.nii.gz"), tissues)
    assert (staged.public / drawn["sub-002"] / "t2w.nii.gz").is_file()


def test_feta_wrong_layout(amb_registry, tmp_path):
    nii(tmp_path / "T2w.nii.gz", ct(0))
    track, task = small(amb_registry, "segmentation/feta", 1)
    with pytest.raises(UserError, match=r"no FeTA subjects; expected sub-XXX/anat"):
        stage_from_folder(track, task, tmp_path / "root", tmp_path)


# ---------------------------------------------------------------- the command line, end to end


@pytest.mark.slow  # stages a real task and scores it through the CLI
def test_cli_stage_then_score_a_real_task(tmp_path, monkeypatch):
    """`automedbench stage segmentation/kidney --from` on a 20-case KiTS19 layout, then the perfect baseline."""
    src = tmp_path / "kits19"
    for i in range(21):
        case = src / "data" / f"case_{i:05d}"
        nii(case / "imaging.nii.gz", ct(i))
        nii(case / "segmentation.nii.gz", label_map(tumour=i != 4))
    monkeypatch.setenv("AUTOMEDBENCH_DATA", str(tmp_path / "root"))
    result = run_cli("stage", "segmentation/kidney", "--from", str(src), catch_exceptions=False)
    assert result.exit_code == 0 and "staged 20 case(s)" in result.output
    result = run_cli("evaluate", "--task", "segmentation/kidney", "--baseline", "perfect", catch_exceptions=False)
    assert result.exit_code == 0 and "Rating A" in result.output
    result = run_cli("stage", "segmentation/kidney", catch_exceptions=False)
    assert result.exit_code == 2 and "needs --from PATH" in result.output


def test_pants_per_case_folders_and_kits_without_data_folder(amb_registry, tmp_path):
    """PanTSMini-style CASE/ct.nii.gz + CASE/segmentations/, and KiTS19 case folders directly in SOURCE."""
    src = tmp_path / "mini"
    for case_id, tumour in (("PanTS_00000003", True), ("PanTS_00000001", True)):
        masks = pants_case(tmp_path / "tmp", case_id, tumour)
        nii(src / case_id / "ct.nii.gz", ct(3))
        for name, mask in masks.items():
            nii(src / case_id / "segmentations" / f"{name}.nii.gz", mask)
    track, task = small(amb_registry, "segmentation/pancreas", 2)
    staged = stage_from_folder(track, task, tmp_path / "root", src)
    assert set(sources(staged)) == {"PanTS_00000001", "PanTS_00000003"}
    kits = tmp_path / "flat"
    nii(kits / "case_00007" / "imaging.nii.gz", ct(7))
    nii(kits / "case_00007" / "segmentation.nii.gz", label_map(True))
    track, task = small(amb_registry, "segmentation/kidney", 1)
    assert list(sources(stage_from_folder(track, task, tmp_path / "root", kits))) == ["case_00007"]
