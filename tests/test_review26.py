"""Review 26: what the merges of redteam31, conform24, polish2, redteam30 and the lead's seccomp change left open.

- **How a download stored an image, still told by the published PNG** (vqa and report_gen release stagers,
  `reencode_image`; redteam30 made the colour type follow the pixels): (a) grey content stored in a mode PNG
  cannot hold (CMYK, YCbCr, 32-bit grey TIFF) went out as RGB while the same content stored as RGB or grey went
  out grey; (b) a source's ICC profile went out byte for byte (PIL copies a decoded image's `icc_profile` into
  the PNG it saves), against `png_bytes`'s promise of no ICC profile; (c) a grey or RGB source's transparent
  colour went out as a tRNS chunk, even naming a colour no pixel has. Each through the real Kvasir-VQA stager,
  the "yes" images stored one way and the "no" images the other, as in round 30.
- **report_gen's section headers, quadratic in a run of whitespace** (conform24's `(?:^|\\n)\\s*` anchor, as the
  quadratic round-21 one before it): each start in the run rescanned it, so a valid 8000-character report of
  newlines cost 1.6 CPU-s per case to section (590 cases: 16 CPU-min of the evaluator). Now each run is tried from
  its first newline only; the sections equal the old rule's on 3000 generated reports.
- **`reencode_image` bounded a 32-bit image at a byte a value** (`check_image` counts four): a float TIFF passed
  a memory bound four times too large.
"""

from __future__ import annotations

import io
import random
import re
import struct
import time
from pathlib import Path

import attrs
import numpy as np
import pytest
from automedbench.testing import load_task, stage_from_folder
from automedbench_report_gen import text as report_text
from automedbench_report_gen.contract import check_report_bytes
from PIL import Image
from test_redteam_round30 import KVASIR, QUESTIONS, _kvasir_layout


def _chunks(data: bytes) -> list[bytes]:
    """The chunk types of a PNG, in order (its 8-byte signature skipped)."""
    names, pos = [], 8
    while pos + 8 <= len(data):
        length, name = struct.unpack(">I4s", data[pos:pos + 8])
        names.append(name)
        pos += 12 + length
    return names


def _saved(image: Image.Image, fmt: str, **options: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def _cmyk(image: Image.Image, yes: bool) -> bytes:
    """Grey content: a CMYK TIFF for "yes", an RGB PNG for "no"."""
    grey = image.convert("L")
    return _saved(grey.convert("CMYK"), "TIFF") if yes else _saved(grey.convert("RGB"), "PNG")


def _icc(image: Image.Image, yes: bool) -> bytes:
    """The same RGB PNG, with an ICC profile for "yes"."""
    return _saved(image, "PNG", icc_profile=b"a profile only the yes images carry") if yes else _saved(image, "PNG")


def _trns(image: Image.Image, yes: bool) -> bytes:
    """Grey pixels from 1 up, with a tRNS naming grey 0 (no pixel's) for "yes"."""
    grey = Image.fromarray(np.maximum(np.asarray(image.convert("L")), 1))
    return _saved(grey, "PNG", transparency=0) if yes else _saved(grey, "PNG")


@pytest.mark.parametrize("store", [_cmyk, _icc, _trns], ids=["cmyk", "icc", "trns"])
def test_no_published_header_says_how_the_download_stored_an_image(tmp_path: Path, store) -> None:
    """Before: "yes" images published as RGB (cmyk), with an iCCP chunk (icc) or a tRNS chunk (trns), the "no"
    ones not: every question answered from the header. Now one colour type and the same chunks for all, and the
    pixels a viewer sees are the source's."""
    sources = _kvasir_layout(tmp_path / "src", store)
    track, spec = load_task(KVASIR)
    spec = attrs.evolve(spec, params={**spec.params, "sample": None}, case_count=QUESTIONS)
    staged = stage_from_folder(track, spec, tmp_path / "data", tmp_path / "src")
    published = [(staged.public / qid / "image.png").read_bytes() for qid in staged.case_ids]
    assert len(published) == QUESTIONS
    assert len({data[25] for data in published}) == 1  # IHDR colour type
    assert {tuple(_chunks(data)) for data in published} == {(b"IHDR", b"amBp", b"IDAT", b"IEND")}
    seen = set()
    for data in sources:
        with Image.open(io.BytesIO(data)) as image:
            seen.add(np.asarray(image.convert("RGBA")).tobytes())
    for data in published:
        with Image.open(io.BytesIO(data)) as image:
            assert np.asarray(image.convert("RGBA")).tobytes() in seen


# the round-24 rule as merged (the original's anchor, each start tried): the oracle the linear scan must equal
_MERGED_HEADER = re.compile(r"(?:^|\n)\s*([A-Za-z][A-Za-z /(),-]{1,40})\s*:\s*", re.M)


def _merged_sections(text: str) -> dict[str, str]:
    found, pos = [], 0
    while (match := _MERGED_HEADER.search(text, pos)) is not None:
        header = report_text._is_header(match.group(1))
        found += [match] if header else []
        pos = match.end() if header else match.start() + 1
    out: dict[str, str] = {}
    for i, match in enumerate(found):
        body = text[match.end():found[i + 1].start() if i + 1 < len(found) else len(text)].strip()
        if body:
            out.setdefault(match.group(1).strip().upper(), body)
    return out


def test_report_sections_are_linear_in_a_run_of_whitespace() -> None:
    """Before: 1.6 CPU-s to score one valid report of newlines (both section reads). Now well under 0.3."""
    report = "FINDINGS: normal heart and lungs noted\n" + "\n" * 7900 + "x"
    assert check_report_bytes(report.encode()) == []  # a valid report: the evaluator scores it
    started = time.process_time()
    assert report_text.scored_text(report) == report[len("FINDINGS: "):].strip()
    assert not report_text.has_impression_only(report)
    mixed = "FINDINGS: a\n" + " \n" * 3900 + "Lungs: clear"  # a run before a name that is no header
    assert report_text.sections(mixed) == {"FINDINGS": mixed[len("FINDINGS: "):].strip()}
    assert time.process_time() - started < 0.3


def test_report_sections_are_the_merged_rule_s() -> None:
    """The linear scan reads the same sections as the anchor tried at every start, on generated reports."""
    tokens = ["FINDINGS", "IMPRESSION", "Lungs", "Heart size", "HEART", "x", "normal", ":", ": ", "\n", "\n\n", "  ",
              "\t", " \n ", "\n  ", "(PA)", ",", "A B", "CHEST, TWO VIEWS", "\r", "\x0b", "Findings"]
    rng = random.Random(26)
    for _ in range(3000):
        report = "".join(rng.choice(tokens) for _ in range(rng.randint(0, 14)))
        assert report_text.sections(report) == _merged_sections(report), repr(report)


def test_a_32_bit_image_is_bounded_by_its_decoded_bytes(monkeypatch) -> None:
    """`reencode_image` checked a download's image at one byte a value: a float or 32-bit grey TIFF (four) decoded
    to four times the memory bound before it was refused. Now it is refused by its header, as `check_image` does."""
    import automedbench.untrusted as untrusted
    from automedbench.api import UserError, reencode_image

    monkeypatch.setattr(untrusted, "max_image_bytes", lambda: 1000)
    grey = Image.fromarray(np.zeros((20, 20), np.uint8))  # 400 values: within 1000 bytes at one byte each
    assert reencode_image(_saved(grey, "TIFF"), "grey.tif")
    with pytest.raises(UserError, match="1600 bytes decoded"):
        reencode_image(_saved(grey.convert("F"), "TIFF"), "float.tif")
