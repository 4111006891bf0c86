"""Stagers read downloads as untrusted input: crafted files per parser family end in one line, never a crash.

Each case builds a malicious download in code (archives with `..` or symlink members, decompression bombs,
oversized tables, XML entity expansion, JSON nested past any dataset) and feeds it to the shared helpers and
to the stager code that reads that family.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
import zipfile
import zlib

import pytest
from automedbench import untrusted
from automedbench.errors import UserError

LAUGHS = (b'<?xml version="1.0"?>\n<!DOCTYPE lolz [<!ENTITY lol "lol">'
          + b"".join(b'<!ENTITY lol%d "%s">' % (i, (b"&lol%d;" % (i - 1) if i > 1 else b"&lol;") * 10)
                     for i in range(1, 10))
          + b"]>\n<annotation><object><name>&lol9;</name></object></annotation>")
EXTERNAL = (b'<?xml version="1.0"?>\n<!DOCTYPE a [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
            b"<annotation><object><name>&x;</name></object></annotation>")


def _one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text and text
    return text


# ---------------------------------------------------------------- the helpers, one family each


@pytest.mark.parametrize("doc", [LAUGHS, EXTERNAL, LAUGHS.replace(b"DOCTYPE", b"doctype")])
def test_xml_with_entities_is_refused(doc):
    with pytest.raises(UserError) as exc:
        untrusted.parse_xml(doc, "ann.xml")
    assert "DOCTYPE" in _one_line(exc)


def test_plain_xml_parses():
    root = untrusted.parse_xml(b"<annotation><object><name>Nodule</name></object></annotation>", "ann.xml")
    assert root.find("object/name").text == "Nodule"


def test_deep_json_is_refused_before_recursion():
    deep = "[" * 200_000 + "]" * 200_000
    with pytest.raises(UserError) as exc:
        untrusted.loads_json(deep, "a.json")
    assert "nested deeper" in _one_line(exc)
    # brackets inside strings do not count; a shallow document with many of them loads
    text = json.dumps({"q": "[[[[" * 1000, "a": [[1, 2], {"b": "}}}"}]})
    assert untrusted.loads_json(text, "b.json")["a"][1]["b"] == "}}}"
    with pytest.raises(UserError, match="not valid JSON"):
        untrusted.loads_json('{"a": ', "c.json")


def test_oversized_and_linked_files_are_refused(tmp_path):
    big = tmp_path / "table.csv"
    with open(big, "wb") as fh:
        fh.truncate(2048)  # sparse: the declared size is what counts
    with pytest.raises(UserError) as exc:
        untrusted.read_bytes(big, max_bytes=1024)
    assert "larger than 1024" in _one_line(exc)
    link = tmp_path / "meta.csv"
    os.symlink("/etc/passwd", link)
    with pytest.raises(UserError, match="regular file"):
        untrusted.read_text(link)
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match="regular file"):
        untrusted.read_bytes(fifo)


def test_gzip_bomb_is_refused_before_it_is_in_memory(tmp_path):
    bomb = gzip.compress(b"\0" * (64 << 20))  # 64 MiB of zeros in about 64 kB
    assert len(bomb) < 100_000
    with pytest.raises(UserError) as exc:
        untrusted.gunzip(bomb, "split.csv.gz", max_bytes=1 << 20)
    assert "decompression bomb" in _one_line(exc)
    path = tmp_path / "split.csv.gz"
    path.write_bytes(bomb)
    with pytest.raises(UserError):
        untrusted.read_text(path, max_bytes=1 << 20)
    path.write_bytes(gzip.compress(b"a,b\n1,2\n"))
    assert untrusted.read_text(path) == "a,b\n1,2\n"



@pytest.mark.parametrize("decoder", ["installed", "stdlib"])
def test_damaged_gzip_is_one_line_whatever_the_decoder(monkeypatch, decoder):
    """Truncated, corrupt-deflate, bad-CRC and garbage-tailed data end as a UserError with either decoder (the
    standard library's let a corrupt deflate stream escape as zlib.error before); good data decodes the same."""
    if decoder == "stdlib":
        monkeypatch.setattr(untrusted, "_gzip_module", lambda: (gzip, (OSError, EOFError, zlib.error)))
    good = gzip.compress(bytes(range(256)) * 4000)
    assert untrusted.gunzip(good + gzip.compress(b"tail"), "x.gz") == bytes(range(256)) * 4000 + b"tail"
    damaged = [good[:-10], good[:-8] + b"\0\0\0\0" + good[-4:], good[:20] + b"\xff" * 40 + good[60:],
               good + b"garbage!", b"\x1f\x8b" + b"x" * 30]
    for data in damaged:
        with pytest.raises(UserError) as exc:
            untrusted.gunzip(data, "x.gz")
        assert "not readable gzip data" in _one_line(exc)

def _zip(tmp_path, members) -> object:
    path = tmp_path / "imgs.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, mode in members:
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            if mode:
                info.external_attr = mode << 16
            z.writestr(info, data)
    return path


@pytest.mark.parametrize("members,why", [
    ([("../evil.jpg", b"x", 0)], "leaves the archive"),
    ([("/abs.jpg", b"x", 0)], "leaves the archive"),
    ([("imgs/link.jpg", b"/etc/passwd", 0o120777)], "symlink"),
    ([("imgs/bomb.jpg", b"\0" * (8 << 20), 0)], "fold"),
])
def test_crafted_zip_archives_are_refused(tmp_path, members, why):
    with pytest.raises(UserError) as exc:
        untrusted.open_zip(_zip(tmp_path, members))
    assert why in _one_line(exc)


def test_zip_member_read_is_bounded_whatever_its_header_says(tmp_path):
    path = _zip(tmp_path, [("imgs/a.jpg", os.urandom(4096), 0)])
    with untrusted.open_zip(path) as archive:
        assert len(untrusted.read_zip_member(archive, "imgs/a.jpg")) == 4096
        with pytest.raises(UserError, match="decompresses past"):
            untrusted.read_zip_member(archive, "imgs/a.jpg", max_bytes=1000)


def test_tar_members_that_leave_or_link_are_flagged():
    def member(name, kind=tarfile.REGTYPE, size=10):
        info = tarfile.TarInfo(name)
        info.type, info.size = kind, size
        return info

    assert untrusted.tar_member_ok(member("ecgen-radiology/1.xml")) is None
    assert "leaves" in untrusted.tar_member_ok(member("../../etc/cron.d/x"))
    assert "link" in untrusted.tar_member_ok(member("a.xml", tarfile.SYMTYPE))
    assert "link" in untrusted.tar_member_ok(member("a.xml", tarfile.LNKTYPE))
    assert "neither" in untrusted.tar_member_ok(member("dev", tarfile.CHRTYPE))
    assert "declares" in untrusted.tar_member_ok(member("a.xml", size=1 << 40))


# ---------------------------------------------------------------- the stagers that read each family


def test_detection_voc_stager_refuses_entity_expansion(tmp_path):
    from automedbench_detection.data import stagers

    path = tmp_path / "000001.xml"
    path.write_bytes(LAUGHS)
    with pytest.raises(UserError) as exc:
        stagers._voc_boxes(path, {"lol": "Nodule"})
    assert str(path) in _one_line(exc)


def test_detection_coco_stager_skips_a_json_bomb(tmp_path):
    from automedbench_detection.data import stagers

    (tmp_path / "train.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(UserError) as exc:  # the bomb is skipped like any non-COCO file; none found: one line
        stagers._coco_document(tmp_path, ["Caries"])
    _one_line(exc)


def test_report_gen_stagers_refuse_bombs(tmp_path, monkeypatch):
    from automedbench_report_gen.data import stagers

    bomb = tmp_path / "mimic-cxr-2.0.0-split.csv.gz"
    bomb.write_bytes(gzip.compress(b"\0" * (32 << 20)))
    monkeypatch.setattr(stagers, "MAX_TABLE_BYTES", 1 << 20)
    with pytest.raises(UserError, match="decompression bomb"):
        stagers._text(bomb)
    xml = tmp_path / "ecgen-radiology" / "1.xml"
    xml.parent.mkdir()
    xml.write_bytes(LAUGHS)
    with pytest.raises(UserError, match="DOCTYPE"):
        list(stagers.iu_xray(tmp_path, {}, stagers.Found()))
    deep = tmp_path / "annotation.json"
    deep.write_text("{\"test\": " * 10_000 + "1" + "}" * 10_000)
    with pytest.raises(UserError, match="nested deeper"):
        list(stagers.iu_xray(tmp_path, {}, stagers.Found()))


def test_iu_report_archive_skips_links_and_refuses_entities(tmp_path):
    from automedbench_report_gen.iu_reports import read_reports

    archive = tmp_path / "NLMCXR_reports.tgz"
    good = (b"<eCitation><uId id='CXR1'/><AbstractText Label='FINDINGS'>Clear lungs.</AbstractText>"
            b"<AbstractText Label='IMPRESSION'>Normal.</AbstractText></eCitation>")
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in (("ecgen-radiology/1.xml", good),):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("ecgen-radiology/2.xml")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
        escape = tarfile.TarInfo("../3.xml")
        escape.size = len(good)
        tar.addfile(escape, io.BytesIO(good))
    reports = read_reports(archive)
    assert [r.uid for r in reports] == ["CXR1"] and reports[0].findings == "Clear lungs."
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("ecgen-radiology/4.xml")
        info.size = len(LAUGHS)
        tar.addfile(info, io.BytesIO(LAUGHS))
    with pytest.raises(UserError, match="DOCTYPE"):
        read_reports(archive)


def test_vqa_image_store_refuses_crafted_zips(tmp_path):
    from automedbench_vqa.data.stagers import ImageStore

    _zip(tmp_path, [("imgs/../../evil.jpg", b"x", 0)])
    with pytest.raises(UserError, match="leaves the archive"):
        ImageStore(tmp_path, "imgs")
    (tmp_path / "imgs.zip").unlink()
    _zip(tmp_path, [("imgs/a.jpg", b"\0" * (8 << 20), 0)])
    with pytest.raises(UserError, match="fold"):
        ImageStore(tmp_path, "imgs")


def test_vqa_slake_stager_refuses_deep_json(tmp_path):
    from automedbench.api import StagingSecret
    from automedbench.plugins import registry
    from automedbench_vqa.data.stagers import slake

    (tmp_path / "test.json").write_text("[" * 50_000 + "]" * 50_000)
    task = next(t for _track, t in registry().tasks().values() if t.track == "vqa")
    with pytest.raises(UserError, match="nested deeper"):
        list(slake(task, tmp_path, StagingSecret()))


# ---------------------------------------------------------------- paths from list files, image headers


@pytest.mark.parametrize("bad", ["/etc/passwd", "../x", "a/../../x", "a\0b", "link/secret"])
def test_paths_a_list_file_names_stay_inside_the_download(tmp_path, bad):
    from automedbench.api import inside

    (tmp_path / "dl" / "a").mkdir(parents=True)
    (tmp_path / "dl" / "link").symlink_to(tmp_path)
    with pytest.raises(UserError, match=r"leaves the download|symlink"):
        inside(tmp_path / "dl", bad)
    assert inside(tmp_path / "dl", "a/b.png") == tmp_path / "dl" / "a" / "b.png"


def test_image_headers_are_checked_before_decoding(tmp_path):
    import numpy as np
    from automedbench.api import check_image

    big = tmp_path / "big.npy"
    with open(big, "wb") as fh:  # a header declaring 10^12 float64 values, and no data
        np.lib.format.write_array_header_1_0(fh, {"descr": "<f8", "fortran_order": False, "shape": (10**6, 10**6)})
    mha = tmp_path / "big.mha"
    mha.write_text("ObjectType = Image\nNDims = 3\nDimSize = 5000 5000 5000\nElementType = MET_SHORT\n"
                   "ElementDataFile = LOCAL\n")
    for path in (big, mha):
        with pytest.raises(UserError, match="image header declares"):
            check_image(path)
    small = tmp_path / "small.npy"
    np.save(small, np.zeros((4, 4)))
    assert check_image(small) == small
    with pytest.raises(UserError, match="image header declares"):  # the memory bound, not only pixels
        check_image(small, max_bytes=64)
    (tmp_path / "link.npy").symlink_to(small)
    with pytest.raises(UserError, match="symlink"):
        check_image(tmp_path / "link.npy")


# ---------------------------------------------------------------- issue 35, class 8: hostile downloads through `stage`
# Each attack of the issue, through the command line: one line on stderr, exit 2, nothing published (each
# failed on main: a published host file, a traceback, gigabytes of memory, a perfect baseline of 0.95).


def _stage(task_id: str, source, root):
    from automedbench.cli import main
    from click.testing import CliRunner

    return CliRunner().invoke(main, ["stage", task_id, "--from", str(source), "--data-root", str(root)])


def _refused(result, *words: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    # a staging past 2 s (a loaded machine) also shows progress lines on stderr: those are not the refusal
    lines = [line for line in result.output.splitlines() if line.strip() and not line.startswith("staging ")]
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in result.output, result.output
    for word in words:
        assert word in lines[0], (word, lines[0])


def _brain_tumour_download(root, per_class: int = 25):
    import numpy as np
    from PIL import Image

    for k, folder in enumerate(["glioma", "meningioma", "notumor", "pituitary"]):
        for n in range(per_class):
            path = root / "Testing" / folder / f"{folder}-{n:04d}.jpg"
            path.parent.mkdir(parents=True, exist_ok=True)
            pixels = np.random.default_rng(1000 * k + n).integers(0, 255, (40, 40)).astype(np.uint8)
            Image.fromarray(pixels).save(path)
    return root


def test_a_hard_link_in_a_class_folder_publishes_no_host_file(tmp_path):
    """A class folder holding a hard link to a file outside the download (here a host image that must stay
    private: another task's reference, a user's photo) published that file's pixels to every sandbox."""
    import numpy as np
    from PIL import Image

    source = _brain_tumour_download(tmp_path / "dl")
    host = tmp_path / "host" / "private-photo.jpg"
    host.parent.mkdir()
    Image.fromarray(np.full((40, 40), 77, np.uint8)).save(host)
    victim = source / "Testing" / "glioma" / "glioma-0003.jpg"
    victim.unlink()
    os.link(host, victim)
    result = _stage("classification/brain-tumour-mri", source, tmp_path / "root")
    _refused(result, "glioma-0003.jpg", "hard link")
    assert not (tmp_path / "root" / "classification" / "brain-tumour-mri" / "public").exists()


def test_a_zip_member_with_a_bad_crc_is_one_line(tmp_path):
    """A HAM10000 image zip with one member's bytes flipped ended `stage` in a zipfile traceback (BadZipFile)."""
    import csv
    import io

    import numpy as np
    from PIL import Image

    source = tmp_path / "ham"
    source.mkdir()
    rows = []
    with zipfile.ZipFile(source / "HAM10000_images_part1.zip", "w", zipfile.ZIP_STORED) as archive:
        for k, dx in enumerate((["akiec", "bcc", "bkl", "df", "mel", "nv", "vasc"] * 15)[:100]):  # all 100 staged
            buffer = io.BytesIO()
            Image.fromarray(np.random.default_rng(k).integers(0, 255, (20, 20, 3)).astype(np.uint8)).save(
                buffer, format="JPEG")
            archive.writestr(f"ISIC_{k:07d}.jpg", buffer.getvalue())
            rows.append({"lesion_id": f"HAM_{k:07d}", "image_id": f"ISIC_{k:07d}", "dx": dx})
    with open(source / "HAM10000_metadata.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["lesion_id", "image_id", "dx"])
        writer.writeheader()
        writer.writerows(rows)
    data = bytearray((source / "HAM10000_images_part1.zip").read_bytes())
    with zipfile.ZipFile(source / "HAM10000_images_part1.zip") as archive:
        info = archive.getinfo("ISIC_0000000.jpg")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    for i in range(start + 100, start + 140):  # inside the first member's stored bytes: its CRC no longer holds
        data[i] ^= 0xFF
    (source / "HAM10000_images_part1.zip").write_bytes(bytes(data))
    result = _stage("classification/skin-lesion", source, tmp_path / "root")
    _refused(result, "ISIC_0000000.jpg", "cannot be read")


def _synthrad(root, n: int = 20):
    import numpy as np

    for i in range(n):
        folder = root / "Task1" / "HN" / f"1HNA{i:03d}"
        ct = np.random.default_rng(i).integers(-1000, 1000, (16, 16, 12)).astype(np.int16)
        _mha(folder / "ct.mha", ct)
        _mha(folder / "mr.mha", (np.clip(ct, 0, 400) * 2.5).astype(np.float32))
        _mha(folder / "mask.mha", np.ones(ct.shape, np.uint8))
    return root


def _mha(path, volume, spacing: str = "1 1 3", compressed: bool = False, dims: str | None = None) -> None:
    import zlib

    import numpy as np

    kind = {"int16": "MET_SHORT", "float32": "MET_FLOAT", "uint8": "MET_UCHAR"}[str(volume.dtype)]
    raw = np.ascontiguousarray(volume.transpose(2, 1, 0)).tobytes()
    raw = zlib.compress(raw, 9) if compressed else raw
    header = (f"ObjectType = Image\nNDims = 3\nBinaryData = True\nBinaryDataByteOrderMSB = False\n"
              f"CompressedData = {compressed}\nTransformMatrix = 1 0 0 0 1 0 0 0 1\nOffset = 0 0 0\n"
              f"ElementSpacing = {spacing}\nDimSize = {dims or ' '.join(map(str, volume.shape))}\n"
              f"ElementType = {kind}\nElementDataFile = LOCAL\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(header.encode() + raw)


@pytest.mark.parametrize("spacing", ["1 nan 3", "1 inf 3", "1 -1 3", "1 0 3"])
def test_a_metaimage_header_holding_nan_is_one_line(tmp_path, spacing):
    """A NaN spacing in a SynthRAD `.mha` ended `stage` in a traceback (a NaN affine reaches nibabel)."""
    import numpy as np

    source = _synthrad(tmp_path / "dl")
    _mha(source / "Task1" / "HN" / "1HNA004" / "mr.mha", np.ones((16, 16, 12), np.float32), spacing=spacing)
    result = _stage("synthesis/synthrad2025-mrct", source, tmp_path / "root")
    _refused(result, "1HNA004", "ElementSpacing")


def test_a_compressed_metaimage_bomb_is_refused_before_it_is_inflated(tmp_path, monkeypatch):
    """A few MB of zlib data declaring 2^27 voxels: the reader inflated all of it and made float copies (5 GB
    for the issue's 3.8 MB file) before anything was checked against memory. Now the header is checked first."""
    import tracemalloc

    import numpy as np
    from automedbench import untrusted
    from automedbench_synthesis.data.readers import read_mha

    monkeypatch.setattr(untrusted, "max_image_bytes", lambda: 256 << 20)  # a machine with 1 GB free
    path = tmp_path / "bomb.mha"
    _mha(path, np.zeros((512, 512, 64), np.int16), compressed=True, dims="512 512 512")  # 16 MB of zeros: 16 kB
    tracemalloc.start()
    try:
        with pytest.raises(UserError, match=r"bomb\.mha: image header declares 512x512x512"):
            read_mha(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20, peak  # refused from the header: nothing was inflated


def test_a_case_no_submission_could_score_is_never_staged(tmp_path):
    """A SynthRAD case of 3x3-voxel planes (smaller than the SSIM window) was staged and scored 0 even for the
    reference itself: the perfect baseline got 0.95, not 1.0. It is passed over now; the perfect scores 1.0."""
    import numpy as np
    from automedbench.cli import main
    from click.testing import CliRunner

    source = _synthrad(tmp_path / "dl", 21)
    folder = source / "Task1" / "HN" / "1HNA000"
    for name, dtype in (("ct", np.int16), ("mr", np.float32), ("mask", np.uint8)):
        _mha(folder / f"{name}.mha", np.ones((3, 3, 40), dtype), compressed=True)
    assert _stage("synthesis/synthrad2025-mrct", source, tmp_path / "root").exit_code == 0
    facts = json.loads((tmp_path / "root" / "synthesis" / "synthrad2025-mrct" / "private" / "cases.json").read_text())
    assert "1HNA000" not in {case["source"] for case in facts["cases"].values()}
    assert any("1HNA000" in why for why in facts.get("skipped", [])) or len(facts["cases"]) == 20
    result = CliRunner().invoke(main, ["evaluate", "--task", "synthesis/synthrad2025-mrct", "--baseline", "perfect",
                                       "--data-root", str(tmp_path / "root"), "--out", str(tmp_path / "ev")])
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "ev" / "result.json").read_text())
    assert record["task"]["strict"] == 1.0 and record["task"]["partial"] == 1.0


def _kits(root, n: int = 3):
    import nibabel as nib
    import numpy as np

    for i in range(n):
        case = root / "data" / f"case_{i:05d}"
        case.mkdir(parents=True)
        labels = np.zeros((8, 7, 6), np.uint8)
        labels[2:6, 2:5, 1:5], labels[3:5, 3:4, 2:4] = 1, 2
        nib.save(nib.Nifti1Image(np.full((8, 7, 6), i, np.int16), np.diag([0.8, 0.8, 2.5, 1.0])),
                 str(case / "imaging.nii.gz"))
        nib.save(nib.Nifti1Image(labels, np.diag([0.8, 0.8, 2.5, 1.0])), str(case / "segmentation.nii.gz"))
    return root


def test_a_truncated_gzip_volume_and_a_nan_voxel_size_are_one_line(tmp_path, monkeypatch):
    import struct

    import attrs
    import nibabel as nib
    import numpy as np
    from automedbench.plugins import registry
    from automedbench.staging import stage

    track, task = registry().task("segmentation/kidney")
    task = attrs.evolve(task, case_count=3)
    source = _kits(tmp_path / "dl")
    image = source / "data" / "case_00001" / "imaging.nii.gz"
    image.write_bytes(image.read_bytes()[:60])  # the gzip stream cut short, inside the voxels
    with pytest.raises(UserError) as info:
        stage(track, task, tmp_path / "root", source)
    assert "\n" not in str(info.value) and "case_00001" in str(info.value)
    source = _kits(tmp_path / "dl2")
    raw = bytearray(nib.Nifti1Image(np.zeros((8, 7, 6), np.int16), np.diag([0.8, 0.8, 2.5, 1.0])).to_bytes())
    raw[84:88] = struct.pack("<f", float("nan"))  # pixdim[2], the second voxel size
    raw[252:256] = struct.pack("<hh", 0, 0)  # no qform or sform: the voxel sizes make the affine
    (source / "data" / "case_00002" / "imaging.nii.gz").write_bytes(gzip.compress(bytes(raw)))
    with pytest.raises(UserError, match=r"case_00002/imaging.nii.gz: unreadable image header .*not finite"):
        stage(track, task, tmp_path / "root", source)
