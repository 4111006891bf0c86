"""Stagers on tiny copies of each official layout, generated here (no dataset is downloaded): what is
staged, what is refused with one line, and validate-task on a staged MIMIC-CXR layout."""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import attrs
import numpy as np
import pytest
from automedbench.api import UserError
from automedbench_report_gen.track import ReportTrack
from PIL import Image

FINDINGS = ["The heart size is normal. The lungs are clear.", "Small left pleural effusion. Heart is enlarged.",
            "Right lower lobe consolidation. No pneumothorax."]


def image_bytes(i: int, fmt: str = "PNG") -> bytes:
    pixels = (np.random.default_rng(i).random((16, 16)) * 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels, "L").save(buffer, format=fmt)
    return buffer.getvalue()


def put(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode())


def make_mimic(root: Path, studies: int) -> None:
    rows = []
    for k in range(studies + 3):
        subject, study = f"1{k:07d}", f"5{k:07d}"
        folder = root / "files" / f"p{subject[:2]}" / f"p{subject}" / f"s{study}"
        for view in range(1 + k % 2):
            put(folder / f"d{k}-{view}.jpg", image_bytes(k * 10 + view, "JPEG"))
            rows.append({"dicom_id": f"d{k}-{view}", "study_id": study, "subject_id": subject,
                         "split": "train" if k >= studies + 1 else "test"})
        text = (f"INDICATION: cough.\n\nFINDINGS: {FINDINGS[k % 3]}\n\nIMPRESSION: See above.\n" if k != studies
                else "IMPRESSION: No findings section in this one.\n")
        put(folder.with_suffix(".txt"), text)
    out = io.StringIO()
    writer = csv.DictWriter(out, ["dicom_id", "study_id", "subject_id", "split"])
    writer.writeheader()
    writer.writerows(rows)
    put(root / "mimic-cxr-2.0.0-split.csv.gz", gzip.compress(out.getvalue().encode()))


def make_iu_r2gen(root: Path, studies: int) -> None:
    entries = {"train": [], "test": []}
    for k in range(studies):
        paths = [f"CXR{k}_IM-{k}/0.png", f"CXR{k}_IM-{k}/1.png"]
        for v, p in enumerate(paths):
            put(root / "iu_xray" / "images" / p, image_bytes(k * 10 + v))
        entries["test"].append({"id": f"CXR{k}_IM-{k}", "report": FINDINGS[k % 3], "image_path": paths,
                                "split": "test"})
    put(root / "iu_xray" / "annotation.json", json.dumps(entries))


def make_iu_openi(root: Path, studies: int) -> None:
    for k in range(1, studies + 1):
        images = "".join(f'<parentImage id="CXR{k}_IM-{k}-{v}"/>' for v in (1001, 2001))
        for v in (1001, 2001):
            put(root / "png" / f"CXR{k}_IM-{k}-{v}.png", image_bytes(k + v))
        put(root / "ecgen-radiology" / f"{k}.xml",
            f'<eCitation><uId id="CXR{k}"/><Abstract><AbstractText Label="FINDINGS">{FINDINGS[k % 3]}</AbstractText>'
            f'<AbstractText Label="IMPRESSION">Normal.</AbstractText></Abstract>{images}</eCitation>')


def make_chexpert_plus(root: Path, studies: int) -> None:
    rows = []
    for k in range(studies):
        for view in (1, 2):
            rel = f"valid/patient{k:05d}/study1/view{view}_frontal.jpg"
            put(root / "PNG" / Path(rel).with_suffix(".png"), image_bytes(k * 10 + view))
            rows.append({"path_to_image": rel, "split": "valid", "section_findings": FINDINGS[k % 3],
                         "report": f"FINDINGS: {FINDINGS[k % 3]}\nIMPRESSION: Stable."})
    rows.append({"path_to_image": "train/patient99999/study1/view1_frontal.jpg", "split": "train",
                 "section_findings": "x", "report": "FINDINGS: train only"})
    out = io.StringIO()
    writer = csv.DictWriter(out, ["path_to_image", "split", "section_findings", "report"])
    writer.writeheader()
    writer.writerows(rows)
    put(root / "df_chexpert_plus_240401.csv", out.getvalue())


def make_pathcap(root: Path, images: int) -> None:
    pairs = []
    for k in range(images):
        put(root / "imgs" / f"{k:04d}.png", image_bytes(k))
        pairs.append({"image": f"imgs/{k:04d}.png", "caption": f"H&E section {k} showing glandular tissue."})
    pairs.append({"image": "/etc/passwd.png", "caption": "absolute path, refused"})
    pairs.append({"image": "../outside.png", "caption": "parent path, refused"})
    put(root / "captions.json", json.dumps(pairs))


def stage(task_id: str, source: Path, dest: Path, case_count: int = 1, **params):
    """The task staged from a small fixture: `case_count` (1 unless given) is the least it must yield without a
    sample (a short download's refusal is tested in tests/test_polish_round6.py)."""
    track = ReportTrack()
    task = next(t for t in track.tasks() if t.id == task_id)
    task = attrs.evolve(task, case_count=case_count, params={**task.params, **params})
    return track.stage(task, dest, source)


def manifest(staged, case: str) -> dict:
    return json.loads((staged.public / case / "manifest.json").read_text())


def by_source(staged) -> dict[str, str]:
    """The dataset's study id -> the published case id (drawn from the staging's secret)."""
    return {json.loads((staged.private / c / "facts.json").read_text())["source_id"]: c for c in staged.case_ids}


def test_mimic_stages_test_studies_with_all_views_and_findings_only(tmp_path):
    make_mimic(tmp_path / "src", 6)
    staged = stage("report_gen/mimic-cxr", tmp_path / "src", tmp_path / "out", sample=None)
    studies = by_source(staged)  # the one without FINDINGS and train: skipped
    assert sorted(studies) == [f"p1{k:07d}/s5{k:07d}" for k in range(6)]
    assert all(re.fullmatch(r"CXR_[0-9a-f]{8}", c) for c in staged.case_ids)
    assert [len(manifest(staged, studies[s])["image_files"]) for s in sorted(studies)] == [1, 2, 1, 2, 1, 2]
    reference = (staged.private / studies["p10000001/s50000001"] / "report.txt").read_text()
    assert reference.strip() == f"FINDINGS: {FINDINGS[1]}"
    assert not any("p10" in p.name for p in staged.public.rglob("*"))
    first = staged.public / studies["p10000000/s50000000"] / "images" / "01.png"
    assert first.read_bytes() != image_bytes(0, "JPEG")  # decoded and written again as PNG, never the JPEG's bytes
    assert np.array_equal(np.asarray(Image.open(first)), np.asarray(Image.open(io.BytesIO(image_bytes(0, "JPEG")))))


def test_sample_and_ids_are_secret(tmp_path):
    """Two stagings of one download draw their own sample and ids: the split file's order decides nothing."""
    make_mimic(tmp_path / "src", 6)
    drawn = [by_source(stage("report_gen/mimic-cxr", tmp_path / "src", tmp_path / f"s{k}", sample=3))
             for k in range(6)]
    assert all(len(d) == 3 for d in drawn) and not set(drawn[0].values()) & set(drawn[1].values())
    assert len({tuple(sorted(d)) for d in drawn}) > 1  # not the same three studies every time


def test_iu_xray_both_layouts(tmp_path):
    make_iu_r2gen(tmp_path / "r2gen", 4)
    staged = stage("report_gen/iu-xray", tmp_path / "r2gen", tmp_path / "a")
    assert len(staged.case_ids) == 4 and len(manifest(staged, staged.case_ids[0])["image_files"]) == 2
    make_iu_openi(tmp_path / "openi", 3)
    staged = stage("report_gen/iu-xray", tmp_path / "openi", tmp_path / "b", case_count=3)  # no split: a draw of 3
    assert len(staged.case_ids) == 3
    assert (staged.private / staged.case_ids[0] / "report.txt").read_text().startswith("FINDINGS: ")


def test_chexpert_plus_groups_views_by_study_and_keeps_the_full_report(tmp_path):
    make_chexpert_plus(tmp_path / "src", 3)
    staged = stage("report_gen/chexpert-plus", tmp_path / "src", tmp_path / "out", sample=None)
    assert len(staged.case_ids) == 3 and len(manifest(staged, staged.case_ids[0])["image_files"]) == 2
    assert "IMPRESSION: Stable." in (staged.private / staged.case_ids[0] / "report.txt").read_text()


def test_pathcap_reads_captions_and_refuses_paths_outside(tmp_path):
    make_pathcap(tmp_path / "src", 5)
    staged = stage("report_gen/pathcap-100", tmp_path / "src", tmp_path / "out", sample=None)
    images = by_source(staged)
    assert sorted(images) == [f"imgs/{k:04d}.png" for k in range(5)]
    assert (staged.private / images["imgs/0000.png"] / "report.txt").read_text().strip() == \
        "H&E section 0 showing glandular tissue."


def test_wrong_folders_are_refused_with_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    for task, word in [("report_gen/mimic-cxr", "mimic-cxr-2.0.0-split"), ("report_gen/iu-xray", "annotation.json"),
                       ("report_gen/chexpert-plus", "df_chexpert_plus"), ("report_gen/pathcap-500", "captions.json")]:
        with pytest.raises(UserError) as info:
            stage(task, tmp_path / "empty", tmp_path / "out")
        assert word in str(info.value) and "\n" not in str(info.value)


# validate-task also checks the staged case count against the task file, so a synthetic download must be as
# large as the real split's sample: the two tasks with small samples are checked here (iu-xray declares 590
# studies, chexpert-plus 200, pathcap-500 500; their stagers are tested above on smaller layouts)
@pytest.mark.slow  # stages and validates a synthetic download of each real task (minutes under load)
@pytest.mark.parametrize("task_id, make, count", [
    ("report_gen/mimic-cxr", make_mimic, 100), ("report_gen/pathcap-100", make_pathcap, 120)])
def test_validate_task_passes_on_each_real_task_staged_from_a_synthetic_download(tmp_path, task_id, make, count):
    from automedbench.testing import check_track

    make(tmp_path / "src", count)
    data = tmp_path / "data"
    staged = subprocess.run([sys.executable, "-m", "automedbench.cli", "stage", task_id, "--from",
                             str(tmp_path / "src"), "--data-root", str(data)], capture_output=True, text=True)
    assert staged.returncode == 0, staged.stderr
    ok, text = check_track(task_id, data)
    assert ok, text
    assert "baseline reworded evaluates" in text and "perfect baseline scores 1.0 / A" in text


@pytest.mark.parametrize("task_id, make", [
    ("report_gen/mimic-cxr", make_mimic), ("report_gen/iu-xray", make_iu_r2gen),
    ("report_gen/chexpert-plus", make_chexpert_plus), ("report_gen/pathcap-100", make_pathcap),
    ("report_gen/pathcap-500", make_pathcap)])
def test_every_staged_reference_passes_its_own_tasks_checker(tmp_path, task_id, make):
    """The reference is a valid submission of its own task (PathCap's short captions included)."""
    from automedbench_report_gen import contract

    make(tmp_path / "src", 6)
    if "pathcap" in task_id:  # a caption the contract cannot accept (non-ASCII) is not staged as a reference
        pairs = json.loads((tmp_path / "src" / "captions.json").read_text())
        pairs.append({"image": "imgs/0000.png", "caption": "Lymph node, 20 \u00b5m sections."})
        put(tmp_path / "src" / "captions.json", json.dumps(pairs))
    track = ReportTrack()
    task = next(t for t in track.tasks() if t.id == task_id)
    staged = stage(task_id, tmp_path / "src", tmp_path / "out", sample=None)
    assert staged.case_ids
    for case in staged.case_ids:
        present, reasons = contract.check_report_file(staged.private / case / contract.REPORT_FILE, task)
        assert present and reasons == [], (case, reasons)
    if "pathcap" in task_id:
        assert len(staged.case_ids) == 6  # the non-ASCII caption was left out

@pytest.mark.parametrize("bad", ["../../secret.png", "/etc/hostname", "link/0.png"])
def test_iu_xray_refuses_image_paths_that_leave_the_download(tmp_path, bad):
    # a crafted annotation.json: a climbing path, an absolute path, a symlinked folder pointing outside
    make_iu_r2gen(tmp_path / "src", 2)
    put(tmp_path / "secret.png", image_bytes(99))
    (tmp_path / "src" / "iu_xray" / "images" / "link").symlink_to(tmp_path)
    doc = json.loads((tmp_path / "src" / "iu_xray" / "annotation.json").read_text())
    doc["test"][0]["image_path"] = [bad]
    (tmp_path / "src" / "iu_xray" / "annotation.json").write_text(json.dumps(doc))
    with pytest.raises(UserError, match=r"leaves the download|symlink"):
        stage("report_gen/iu-xray", tmp_path / "src", tmp_path / "out")
    assert not (tmp_path / "out" / "public").exists()


def test_an_image_declaring_more_pixels_than_memory_is_refused_not_published(tmp_path):
    # a PNG whose header declares 60000 x 60000 pixels (a few hundred bytes on disk)
    make_iu_r2gen(tmp_path / "src", 2)
    put(tmp_path / "src" / "iu_xray" / "images" / "CXR0_IM-0" / "0.png", png_header(60000, 60000))
    with pytest.raises(UserError, match=r"60000x60000|DecompressionBomb"):
        stage("report_gen/iu-xray", tmp_path / "src", tmp_path / "out")
    assert not (tmp_path / "out" / "public").exists()


def png_header(width: int, height: int) -> bytes:
    """A PNG that is only its signature and header chunk: what a reader sees before any pixel."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)) + chunk(
        b"IEND", b"")


def test_pathcap_skips_a_captioned_image_the_download_lacks_and_refuses_when_too_few_remain(tmp_path):
    """The caption list's `found` record was shadowed by the list of caption files: one missing image ended the
    staging with AttributeError instead of skipping it (and naming it when the download is short)."""
    from automedbench.api import UserError

    make_pathcap(tmp_path / "src", 4)
    (tmp_path / "src" / "imgs" / "0003.png").unlink()
    staged = stage("report_gen/pathcap-100", tmp_path / "src", tmp_path / "out", case_count=3, sample=None)
    assert len(staged.case_ids) == 3
    with pytest.raises(UserError, match=r"only 3 usable studies.*imgs/0003\.png"):
        stage("report_gen/pathcap-100", tmp_path / "src", tmp_path / "out2", case_count=4, sample=None)
