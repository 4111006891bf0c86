"""Stagers on small files in each official layout: the shared staged layout, neutral ids, one schema
for the ground truth, one line for a wrong layout, a fresh draw per staging, validate-task for every task."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import attrs
import detection_layouts as layouts
import numpy as np
import pytest
from automedbench.api import UserError
from automedbench.testing import check_download
from automedbench_detection.data.stagers import fuse_radiologists
from automedbench_detection.track import DetectionTrack
from PIL import Image

TRACK = DetectionTrack()


def task(task_id: str, **changes):
    spec = next(t for t in TRACK.tasks() if t.id == task_id)
    return attrs.evolve(spec, **changes)


def truth(staged, case):
    return json.loads((staged.private / case / "boxes.json").read_text())


def meta(staged, case):
    return json.loads((staged.public / case / "meta.json").read_text())


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_vindr_physionet_dicom(tmp_path):
    pytest.importorskip("pydicom")
    source = layouts.vindr(tmp_path / "src")
    staged = TRACK.stage(task("detection/vindr-cxr"), tmp_path / "dest", source)
    assert len(staged.case_ids) == 10 and all(re.fullmatch(r"cxr_[0-9a-f]{8}", c) for c in staged.case_ids)
    records = [truth(staged, c) for c in staged.case_ids]
    assert sum(1 for r in records if r["boxes"]) == 8 and sum(1 for r in records if not r["boxes"]) == 2
    assert all("deadbeef" not in c and "cafef00d" not in c for c in staged.case_ids)  # neutral ids
    assert {r["source"]["id"][4:] for r in records} == {"deadbeef", "cafef00d"}  # the source id is private
    # three radiologists' boxes of one finding fuse to their mean; other classes stay as separate boxes
    one = next(r for r in records if r["source"]["id"] == "0000deadbeef")
    assert sorted((b["class"], b["x1"], b["x2"]) for b in one["boxes"]) == [
        ("Aortic enlargement", 11.0, 41.0), ("Rib fracture", 50.0, 60.0)]
    m = meta(staged, staged.case_ids[0])
    assert m["width"] == 64 and m["height"] == 64 and "Nodule/Mass" in m["classes"] and len(m["classes"]) == 14
    # MONOCHROME1 is inverted: the image whose top half is stored bright shows it dark
    first = next(c for c, r in zip(staged.case_ids, records, strict=True) if r["source"]["id"] == "0000deadbeef")
    pixels = np.asarray(Image.open(staged.public / first / "image.png"))
    assert pixels.dtype == np.uint8 and pixels[:32].mean() < pixels[32:].mean()
    assert not any((staged.public / c / "boxes.json").exists() for c in staged.case_ids)


def test_vindr_kaggle_csv_with_png_conversions(tmp_path):
    source = layouts.vindr(tmp_path / "src", kaggle=True, png=True)
    staged = TRACK.stage(task("detection/vindr-cxr"), tmp_path / "dest", source)
    assert len(staged.case_ids) == 10


def test_fusing_radiologists():
    rows = [("R8", (0.0, 0.0, 10.0, 10.0)), ("R9", (1.0, 0.0, 11.0, 10.0)), ("R9", (50.0, 50.0, 60.0, 60.0)),
            ("R10", (0.0, 0.0, 10.0, 10.0)), ("R10", (0.0, 0.0, 10.0, 10.0))]
    fused = sorted(fuse_radiologists(rows))
    assert fused == [(1 / 3, 0.0, 31 / 3, 10.0), (50.0, 50.0, 60.0, 60.0)]
    # one radiologist's two overlapping boxes stay two findings
    assert len(fuse_radiologists([("R8", (0.0, 0.0, 10.0, 10.0)), ("R8", (1.0, 0.0, 11.0, 10.0))])) == 2


def test_bccd_voc(tmp_path):
    source = layouts.voc(tmp_path / "src")
    staged = TRACK.stage(task("detection/bccd", case_count=4), tmp_path / "dest", source)
    assert len(staged.case_ids) == 4 and all(re.fullmatch(r"smear_[0-9a-f]{8}", c) for c in staged.case_ids)
    records = {truth(staged, c)["source"]["id"]: c for c in staged.case_ids}
    assert set(records) == {f"BloodImage_{k:05d}" for k in range(4)}  # the test split only
    case = records["BloodImage_00000"]
    record = truth(staged, case)
    boxes = {(b["class"], b["x1"], b["y1"], b["x2"], b["y2"]) for b in record["boxes"]}
    # VOC's 1-based inclusive pixels -> continuous corners; a box past the edge is clipped to 64x48
    assert boxes == {("RBC", 0.0, 0.0, 20.0, 20.0), ("WBC", 29.0, 9.0, 60.0, 40.0),
                     ("Platelets", 4.0, 29.0, 9.0, 34.0), ("RBC", 49.0, 39.0, 64.0, 48.0)}
    image = Image.open(staged.public / case / "image.png")
    assert image.mode == "RGB" and image.size == (64, 48)


def test_grazpedwri_yolo(tmp_path):
    source = layouts.yolo(tmp_path / "src")
    staged = TRACK.stage(task("detection/grazpedwri-dx", case_count=5), tmp_path / "dest", source)
    records = {truth(staged, c)["source"]["id"]: truth(staged, c) for c in staged.case_ids}
    labelled = records["1000_0123456789_01_WRI-L1_M014"]
    # class 3 = fracture, centre (40, 20), size 20x20 on the 80x40 image; "text" (class 8) dropped
    assert [(b["class"], b["x1"], b["y1"], b["x2"], b["y2"]) for b in labelled["boxes"]] == [
        ("fracture", 30.0, 10.0, 50.0, 30.0)]
    assert records["1001_0123456789_01_WRI-L1_M014"]["boxes"] == []
    assert "text" not in meta(staged, staged.case_ids[0])["classes"]
    grey = Image.open(staged.public / staged.case_ids[0] / "image.png")
    assert grey.mode == "L"  # 16-bit sources scaled to 8 bits


def test_dentex_coco(tmp_path):
    source = layouts.coco(tmp_path / "src")
    staged = TRACK.stage(task("detection/dentex", case_count=5), tmp_path / "dest", source)
    case = next(c for c in staged.case_ids if truth(staged, c)["source"]["id"] == "train_2.png")
    record = truth(staged, case)
    assert [(b["class"], b["x1"], b["y2"]) for b in record["boxes"]] == [
        ("Periapical Lesion", 10.0, 35.0), ("Caries", 50.5, 18.0)]
    published, original = staged.public / case / "image.png", source / "xrays" / "train_2.png"
    assert published.read_bytes() != original.read_bytes()  # written again: never the source's bytes ...
    assert np.array_equal(np.asarray(Image.open(published)), np.asarray(Image.open(original)))  # ... same pixels


def test_restaging_draws_anew_and_replaces_atomically(tmp_path):
    source = layouts.voc(tmp_path / "src")
    spec = task("detection/bccd", case_count=4)
    before = TRACK.stage(spec, tmp_path / "dest", source)
    again = TRACK.stage(spec, tmp_path / "dest", source)  # a new secret: new case ids, the old ones gone
    assert not set(before.case_ids) & set(again.case_ids)
    first = tree(tmp_path / "dest")
    with pytest.raises(UserError):
        TRACK.stage(task("detection/bccd", case_count=40), tmp_path / "dest", source)
    assert tree(tmp_path / "dest") == first  # a failed re-stage leaves the old data in place


@pytest.mark.parametrize(("task_id", "build", "message"), [
    ("detection/vindr-cxr", lambda p: p.mkdir(), "annotations/annotations_test.csv"),
    ("detection/bccd", lambda p: p.mkdir(), "Annotations/ and JPEGImages/"),
    ("detection/grazpedwri-dx", lambda p: p.mkdir(), "class names"),
    ("detection/dentex", lambda p: p.mkdir(), "COCO JSON"),
    ("detection/bccd", lambda p: layouts.voc(p, count=2, split=2), "found 2 images in the test split, the task needs"),
])
def test_wrong_layout_is_one_line(tmp_path, task_id, build, message):
    source = tmp_path / "src"
    build(source)
    with pytest.raises(UserError) as err:
        TRACK.stage(task(task_id), tmp_path / "dest", source)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_cli_stage_wrong_layout_exits_2(tmp_path):
    (tmp_path / "src").mkdir()
    proc = subprocess.run([sys.executable, "-m", "automedbench.cli", "stage", "detection/bccd", "--from",
                           str(tmp_path / "src"), "--data-root", str(tmp_path / "data")],
                          capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "Annotations/" in proc.stderr


FULL = {
    "detection/vindr-cxr": lambda p: layouts.vindr(p),
    "detection/bccd": lambda p: layouts.voc(p, count=80, split=72),
    "detection/grazpedwri-dx": lambda p: layouts.yolo(p, count=100),
    "detection/dentex": lambda p: layouts.coco(p, count=50),
}


@pytest.mark.slow  # each writes and validates a full-size download copy (30-50 s under load)
@pytest.mark.parametrize("task_id", sorted(FULL))
def test_validate_task_passes_on_a_full_size_fixture(tmp_path, task_id):
    if task_id.endswith("vindr-cxr"):
        pytest.importorskip("pydicom")
    check_download(task_id, FULL[task_id](tmp_path / "src"), tmp_path / "data")


def test_vindr_task_scores_every_box_as_abnormality(tmp_path):
    from automedbench_detection.metric import DetectionEvaluation

    spec = task("detection/vindr-cxr")
    staged = TRACK.stage(spec, tmp_path / "dest", layouts.vindr(tmp_path / "src", kaggle=True, png=True))
    evaluation = DetectionEvaluation(spec, staged)
    scores = []
    for case in staged.case_ids:
        boxes = truth(staged, case)["boxes"]
        # class names swapped around: the Task (any finding) does not care, the per-class AP does;
        # the rib fracture (not among the 14) can only be named "abnormality"
        pred = [{"class": "abnormality" if b["class"] == "Rib fracture" else "Cardiomegaly", "score": 0.9,
                 "x1": b["x1"], "y1": b["y1"], "x2": b["x2"], "y2": b["y2"]} for b in boxes]
        (tmp_path / "sub" / case).mkdir(parents=True)
        (tmp_path / "sub" / case / "prediction.json").write_text(json.dumps({"boxes": pred}))
        scores.append(evaluation.score_case(case, tmp_path / "sub" / case))
    block = evaluation.aggregate(scores, staged.case_ids)
    assert block.strict == block.partial == 1.0
    comps = block.components
    assert comps["ap_abnormality"] == 1.0 and comps["ap_Cardiomegaly"] < 1.0
    assert comps["ap_Aortic enlargement"] == 0.0 and comps["ap_Atelectasis"] is None  # no reference: left out
    # one case missing: strict 0, partial counts its references as misses
    partial = DetectionEvaluation(spec, staged)
    dropped = next(c for c in staged.case_ids if truth(staged, c)["boxes"])
    kept = [None if c == dropped else partial.score_case(c, tmp_path / "sub" / c) for c in staged.case_ids]
    block = partial.aggregate(kept, staged.case_ids)
    assert block.strict == 0.0 and 0.5 < block.partial < 1.0


def test_an_image_declaring_more_pixels_than_memory_is_refused_before_decoding(tmp_path):
    import struct
    import zlib

    from automedbench_detection.data.stagers import read_image

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    bomb = tmp_path / "bomb.png"  # 40000 x 40000 RGB declared in 45 bytes
    bomb.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 40000, 40000, 8, 2, 0, 0, 0))
                     + chunk(b"IEND", b""))
    with pytest.raises(UserError, match=r"40000x40000|DecompressionBomb"):
        read_image(bomb)
    fine = tmp_path / "fine.png"
    Image.new("L", (8, 6), 7).save(fine)
    assert read_image(fine).shape == (6, 8)
