"""Review 26: what the merges of redteam31, conform24, polish2, redteam30 and the lead's seccomp change left open.

- **How a download stored an image, still told by the published PNG** (vqa and report_gen release stagers,
  `reencode_image`; redteam30 made the colour type follow the pixels): (a) grey content stored in a mode PNG
  cannot hold (CMYK, YCbCr, 32-bit grey TIFF) went out as RGB while the same content stored as RGB or grey went
  out grey; (b) a source's ICC profile went out byte for byte (PIL copies a decoded image's `icc_profile` into
  the PNG it saves), against `png_bytes`'s promise of no ICC profile; (c) a grey or RGB source's transparent
  colour went out as a tRNS chunk, even naming a colour no pixel has. Each through the real Kvasir-VQA stager,
  the "yes" images stored one way and the "no" images the other, as in round 30.
"""

from __future__ import annotations

import io
import struct
from pathlib import Path

import attrs
import numpy as np
import pytest
from automedbench.testing import load_task, stage_from_folder
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
