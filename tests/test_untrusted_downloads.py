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
        list(stagers.iu_xray(tmp_path, {}))
    deep = tmp_path / "annotation.json"
    deep.write_text("{\"test\": " * 10_000 + "1" + "}" * 10_000)
    with pytest.raises(UserError, match="nested deeper"):
        list(stagers.iu_xray(tmp_path, {}))


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
    from automedbench.plugins import registry
    from automedbench_vqa.data.stagers import slake

    (tmp_path / "test.json").write_text("[" * 50_000 + "]" * 50_000)
    task = next(t for _track, t in registry().tasks().values() if t.track == "vqa")
    with pytest.raises(UserError, match="nested deeper"):
        list(slake(task, tmp_path))


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
