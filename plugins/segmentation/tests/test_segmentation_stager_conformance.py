"""Every segmentation stager passes the stager conformance check (`automedbench.testing.check_stager`) on a
small download in its dataset's layout: a fresh secret per staging (which cases, their ids: no case number or
folder order tells a case), volumes written again from their voxels (never the download's bytes), nothing but
regular files published, the perfect baseline exactly 1.0, and hostile downloads (links, FIFOs, damaged files)
refused in one line. Each case's structures sit at a place of their own, so another case's masks (a replayed
answer) score as a guess would."""

from __future__ import annotations

import json

import nibabel as nib
import numpy as np
import pytest
from automedbench.testing import assert_stager_conforms, sampled
from test_segmentation_msd import MSD

SHAPE = (12, 10, 8)
AFF = np.diag([0.8, 0.8, 2.5, 1.0])


def nii(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    image = nib.Nifti1Image(data, AFF)
    image.set_data_dtype(data.dtype)
    nib.save(image, str(path))


def ct(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(-1000, 1000, SHAPE).astype(np.int16)


def box(seed: int, size: int = 4) -> tuple[slice, slice, slice]:
    """A block of its own for each case: another case's mask does not overlap it."""
    x, y = (seed % 3) * size, (seed // 3 % 2) * size + 1
    return slice(x, x + size), slice(y, y + size), slice(1 + seed // 6 % 2 * 3, 4 + seed // 6 % 2 * 3)


def organ_lesion(seed: int, labels: int = 2) -> np.ndarray:
    """Label 1 (the organ) in the case's block, label 2 (a lesion) in its core."""
    lab = np.zeros(SHAPE, np.uint8)
    lab[box(seed)] = 1
    if labels >= 2:
        core = tuple(slice(s.start + 1, s.stop - 1) for s in box(seed))
        lab[core] = 2
    return lab


def kits(src, n=10):
    for i in range(n):
        nii(src / "data" / f"case_{i:05d}" / "imaging.nii.gz", ct(i))
        nii(src / "data" / f"case_{i:05d}" / "segmentation.nii.gz", organ_lesion(i))
    return src


def msd(task_id, n=10):
    folder, prefix, names, modality = MSD[task_id]

    def build(src):
        root = src / folder
        files = []
        for i in range(n):
            name = f"{prefix}_{i + 1:03d}"
            image = np.stack([ct(i), ct(100 + i)], axis=-1) if len(modality) > 1 else ct(i)
            nii(root / "imagesTr" / f"{name}.nii.gz", image)
            nii(root / "labelsTr" / f"{name}.nii.gz", organ_lesion(i, len(names)))
            files.append(f"{name}.nii.gz")
        doc = {"name": folder, "modality": modality, "labels": {"0": "background", **names},
               "training": [{"image": f"./imagesTr/{f}", "label": f"./labelsTr/{f}"} for f in files]}
        (root / "dataset.json").write_text(json.dumps(doc))
        return src
    return build


def pants(structures):
    def build(src, n=10):
        for i in range(n):
            case = f"PanTS_{i + 1:08d}"
            nii(src / "ImageTr" / case / "ct.nii.gz", ct(i))
            for k, name in enumerate(structures):
                mask = np.zeros(SHAPE, np.uint8)
                if name == "pancreatic_lesion":
                    mask[tuple(slice(s.start + 1, s.stop - 1) for s in box(i))] = 1
                elif name == "pancreas":
                    mask[box(i)] = 1
                else:
                    mask[box(i + k)] = 1
                nii(src / "LabelTr" / case / "segmentations" / f"{name}.nii.gz", mask)
        return src
    return build


def feta(src, n=10):
    for i in range(n):
        anat = src / f"sub-{i + 1:03d}" / "anat"
        nii(anat / f"sub-{i + 1:03d}_rec-mial_T2w.nii.gz", ct(i).astype(np.float32))
        lab = np.zeros(SHAPE, np.uint8)
        for k in range(1, 8):
            lab[box(i + k, 2)] = k
        nii(anat / f"sub-{i + 1:03d}_rec-mial_dseg.nii.gz", lab)
    return src


def totalseg(structures):
    def build(src, n=10):
        rows = ["image_id;age;gender;institute;study_type;split"]
        for i in range(n):
            image_id = f"s{i:04d}"
            nii(src / image_id / "ct.nii.gz", ct(i))
            for k, name in enumerate(structures):
                mask = np.zeros(SHAPE, np.uint8)
                mask[box(i + k, 2 if name != "liver" else 4)] = 1
                nii(src / image_id / "segmentations" / f"{name}.nii.gz", mask)
            rows.append(f"{image_id};60;m;A;ct abdomen;test")
        (src / "meta.csv").write_text("\n".join(rows) + "\n")
        return src
    return build


def aeropath(src, n=10):
    for i in range(1, n + 1):
        nii(src / str(i) / f"{i}_CT_HR.nii.gz", ct(i))
        mask = np.zeros(SHAPE, np.uint8)
        mask[box(i)] = 255
        nii(src / str(i) / f"{i}_CT_HR_label_airways.nii.gz", mask)
    return src


def panther(task1):
    def build(src, n=10):
        sitk = pytest.importorskip("SimpleITK")
        for i in range(n):
            sid = f"{10000 + i}_0001" if task1 else f"{10000 + i}"
            labels = np.choose(organ_lesion(i), [0, 2, 1]).astype(np.uint8)  # PANTHER: 1 tumour, 2 pancreas
            for path, array in ((src / "ImagesTr" / f"{sid}_0000.mha", ct(i)),
                                (src / "LabelsTr" / f"{sid}.mha", labels)):
                image = sitk.GetImageFromArray(np.ascontiguousarray(array.transpose(2, 1, 0)))
                image.SetSpacing((0.8, 0.8, 2.5))
                path.parent.mkdir(parents=True, exist_ok=True)
                sitk.WriteImage(image, str(path))
        return src
    return build


TOTALSEG = ["spleen", "kidney_right", "kidney_left", "gallbladder", "liver", "stomach", "pancreas",
            "adrenal_gland_right", "adrenal_gland_left", "esophagus", "aorta", "inferior_vena_cava",
            "portal_vein_and_splenic_vein", "duodenum"]
OAR = ["pancreas", "pancreatic_lesion", "duodenum", "stomach", "common_bile_duct", "superior_mesenteric_artery",
       "aorta", "spleen"]

# (task, fixture download writer, case count): one per stager first
FIXTURES = [
    ("segmentation/kidney", kits, 8),
    ("segmentation/spleen", msd("segmentation/spleen"), 8),
    ("segmentation/pancreas", pants(["pancreas", "pancreatic_lesion"]), 8),
    ("segmentation/pancreas-oar", pants(OAR), 8),
    ("segmentation/feta", feta, 8),
    ("segmentation/totalsegmentator", totalseg(TOTALSEG), 8),
    ("segmentation/aeropath", aeropath, 8),
    ("segmentation/panther-t2", panther(False), 8),
    ("segmentation/liver", msd("segmentation/liver"), 8),
    ("segmentation/prostate", msd("segmentation/prostate"), 8),
    ("segmentation/hepaticvessel", msd("segmentation/hepaticvessel"), 8),
    ("segmentation/colon", msd("segmentation/colon"), 8),
    ("segmentation/heart", msd("segmentation/heart"), 8),
    ("segmentation/panther-t1", panther(True), 8),
]


@pytest.mark.parametrize(("task_id", "write", "count"), sampled(FIXTURES, keep=8))
def test_stager_conformance(tmp_path, task_id, write, count):
    assert_stager_conforms(task_id, write(tmp_path / "download"), tmp_path / "work", case_count=count)
