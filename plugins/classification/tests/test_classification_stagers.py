"""Stagers on small files in each official layout: the shared staged layout, neutral ids, balanced or
floored draws, one line for a wrong layout, idempotent re-staging, validate-task on every task."""

from __future__ import annotations

import json
import re
import zipfile
from collections import Counter
from pathlib import Path

import attrs
import classification_layouts as layouts
import pytest
from automedbench.api import UserError
from automedbench.testing import check_download
from automedbench_classification.track import ClassificationTrack
from PIL import Image

TRACK = ClassificationTrack()


def task(task_id: str, **changes):
    spec = next(t for t in TRACK.tasks() if t.id == task_id)
    return attrs.evolve(spec, **changes)


def labels(staged) -> Counter:
    return Counter(json.loads((staged.private / c / "label.json").read_text())["label"] for c in staged.case_ids)


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("zipped", [True, False])
def test_ham10000_one_image_per_lesion_and_a_class_floor(tmp_path, zipped):
    source = layouts.ham10000(tmp_path / "src", zipped=zipped)
    spec = task("classification/skin-lesion", case_count=40)
    staged = TRACK.stage(spec, tmp_path / "dest", source)
    assert all(re.fullmatch(r"ISIC_[0-9a-f]{8}", c) for c in staged.case_ids) and len(staged.case_ids) == 40
    counts = labels(staged)
    assert min(counts.values()) >= 5 and len(counts) == 7  # the floor for every class
    sources = [json.loads((staged.private / c / "label.json").read_text())["source"] for c in staged.case_ids]
    lesions = {s["id"]: s for s in sources}
    rows = {r["image_id"]: r["lesion_id"] for r in layouts.ham_rows()}
    assert len({rows[i] for i in lesions}) == 40  # never two images of one lesion
    public = {p.name for p in staged.public.rglob("*") if p.is_file()}
    assert public == {"image.jpg", "meta.json"}
    assert not any("ISIC_00" in p.read_text() for p in staged.public.rglob("meta.json"))
    with Image.open(staged.public / staged.case_ids[0] / "image.jpg") as image:
        assert image.format == "JPEG" and image.mode == "RGB" and not image.info.get("exif")
    before = {c: json.loads((staged.private / c / "label.json").read_text())["source"]["id"] for c in staged.case_ids}
    again = TRACK.stage(spec, tmp_path / "dest", source)  # a new staging draws a new secret: new ids, new draw
    after = {c: json.loads((again.private / c / "label.json").read_text())["source"]["id"] for c in again.case_ids}
    assert len(again.case_ids) == 40 and not set(before) & set(after) and before != after


def test_ham10000_dataverse_tab_file(tmp_path):
    staged = TRACK.stage(task("classification/skin-lesion", case_count=40), tmp_path / "dest",
                         layouts.ham10000(tmp_path / "src", tab=True))
    assert len(labels(staged)) == 7


def test_isic2018_one_hot_table(tmp_path):
    staged = TRACK.stage(task("classification/skin-lesion", case_count=40), tmp_path / "dest",
                         layouts.isic2018(tmp_path / "src"))
    assert len(labels(staged)) == 7


def test_isic_multi_hot_rows_are_refused_in_one_line(tmp_path):
    with pytest.raises(UserError, match="one class per image"):
        TRACK.stage(task("classification/skin-lesion", case_count=40), tmp_path / "dest",
                    layouts.isic2018(tmp_path / "src", multi_hot=True))


def test_ham10000_zip_members_leaving_the_archive_are_refused(tmp_path):
    source = layouts.ham10000(tmp_path / "src")
    with zipfile.ZipFile(source / "HAM10000_images_part1.zip", "a") as archive:
        archive.writestr("../../escape.jpg", b"x")
    with pytest.raises(UserError):
        TRACK.stage(task("classification/skin-lesion", case_count=40), tmp_path / "dest", source)


def test_damaged_image_is_one_line(tmp_path):
    source = layouts.kermany(tmp_path / "src", per_class=50)
    for path in (source / "test" / "NORMAL").glob("*.jpeg"):
        path.write_bytes(b"not a jpeg")
    with pytest.raises(UserError, match="not a readable image"):
        TRACK.stage(task("classification/chest-xray-pneumonia"), tmp_path / "dest", source)


@pytest.mark.parametrize("task_id, build, per_class", [
    ("classification/brain-tumour-mri", layouts.brain_tumour, 25),
    ("classification/crc-histology", layouts.crc, 20),
    ("classification/chest-xray-pneumonia", layouts.kermany, 50),
])
def test_class_folders_balanced(tmp_path, task_id, build, per_class):
    staged = TRACK.stage(task(task_id), tmp_path / "dest", build(tmp_path / "src"))
    counts = labels(staged)
    assert set(counts.values()) == {per_class} and set(counts) == set(task(task_id).params["classes"])
    sources = [json.loads((staged.private / c / "label.json").read_text())["source"]["file"] for c in staged.case_ids]
    assert not any(s.startswith("train-") for s in sources)  # the test split, not the training decoy


def test_class_folders_missing_split_is_one_line(tmp_path):
    (tmp_path / "src" / "Training" / "glioma").mkdir(parents=True)
    with pytest.raises(UserError, match="no split folder"):
        TRACK.stage(task("classification/brain-tumour-mri"), tmp_path / "dest", tmp_path / "src")


def test_too_few_images_for_a_balanced_draw(tmp_path):
    source = layouts.brain_tumour(tmp_path / "src", per_class=30)
    for path in sorted((source / "Testing" / "glioma").glob("*.jpg"))[10:]:
        path.unlink()
    with pytest.raises(UserError, match="balanced draw needs 25"):
        TRACK.stage(task("classification/brain-tumour-mri"), tmp_path / "dest", source)


def test_pcam_balanced_from_hdf5(tmp_path):
    pytest.importorskip("h5py")
    staged = TRACK.stage(task("classification/patchcamelyon"), tmp_path / "dest", layouts.pcam(tmp_path / "src"))
    assert labels(staged) == Counter({"negative": 50, "positive": 50})
    with Image.open(staged.public / staged.case_ids[0] / "image.jpg") as image:
        assert image.size == (96, 96)


def test_pcam_refuses_gz_and_external_storage(tmp_path):
    h5py = pytest.importorskip("h5py")
    (tmp_path / "gz").mkdir()
    (tmp_path / "gz" / "camelyonpatch_level_2_split_test_x.h5.gz").write_bytes(b"\x1f\x8b")
    with pytest.raises(UserError, match="gunzip"):
        TRACK.stage(task("classification/patchcamelyon"), tmp_path / "dest", tmp_path / "gz")
    source = layouts.pcam(tmp_path / "src")
    secret = tmp_path / "outside.bin"
    secret.write_bytes(bytes(240))
    y = source / "camelyonpatch_level_2_split_test_y.h5"
    y.unlink()
    with h5py.File(y, "w") as handle:  # labels stored in a file outside the download
        handle.create_dataset("y", shape=(240, 1, 1, 1), dtype="u1", external=[(str(secret), 0, 240)])
    with pytest.raises(UserError, match="external or virtual"):
        TRACK.stage(task("classification/patchcamelyon"), tmp_path / "dest", source)


FULL = {
    "classification/skin-lesion": lambda p: layouts.ham10000(p, prior=layouts.HAM_FULL),
    "classification/brain-tumour-mri": lambda p: layouts.brain_tumour(p),
    "classification/crc-histology": lambda p: layouts.crc(p),
    "classification/patchcamelyon": lambda p: layouts.pcam(p),
    "classification/chest-xray-pneumonia": lambda p: layouts.kermany(p),
}


@pytest.mark.slow  # each writes and validates a full-size download copy (30-50 s under load)
@pytest.mark.parametrize("task_id", sorted(FULL))
def test_validate_task_passes_on_a_full_size_fixture(tmp_path, task_id):
    if task_id.endswith("patchcamelyon"):
        pytest.importorskip("h5py")
    report = check_download(task_id, FULL[task_id](tmp_path / "src"), tmp_path / "data")
    okay = task(task_id).rating.okay
    for name in ("constant", "majority-class", "label-prior"):  # measured on the staged copy, below B
        line = next(line for line in report.splitlines() if f"baseline {name} evaluates" in line)
        assert float(re.search(r"strict ([0-9.]+)", line).group(1)) < okay, line
