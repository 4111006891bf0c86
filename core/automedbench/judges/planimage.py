"""plan.png as the judges see it: checked by its header before any pixel is decoded, then downscaled.

plan.png is written by the agent. A PNG declaring ~89 million pixels (just under PIL's own bomb limit)
cost the harness 0.8 GB to decode, and a corrupt one, sent as-is, made the model API refuse the judge
call (S1–S3 null, the run off the leaderboard). So: the byte size and the IHDR dimensions are checked
first against small caps, only then is the image decoded, and a model judge gets a re-encoded,
downscaled copy, never the agent's bytes (automedbench-models' `llm_judge.png_for_model`). Anything
that fails is evidence ("plan.png unreadable: ..."), not a judge failure.
"""

from __future__ import annotations

import io
import struct
import warnings

from attrs import define

MAX_PNG_BYTES = 5 << 20
MAX_PIXELS = 16_000_000  # 64 MB as RGBA; a 300-dpi page is ~8.4 million
MAX_SIDE = 8192
SIGNATURE = b"\x89PNG\r\n\x1a\n"


@define
class PlanImage:
    """The decoded image (RGB or RGBA) or None, and a one-line note for the judges' rationales/prompt."""

    image: object | None
    note: str
    size: tuple[int, int] = (0, 0)


def png_dimensions(data: bytes) -> tuple[int, int]:
    """(width, height) from the IHDR chunk, which the PNG format requires to come first."""
    if not data.startswith(SIGNATURE):
        raise ValueError("not a PNG (bad signature)")
    if len(data) < 33 or data[12:16] != b"IHDR":
        raise ValueError("truncated or no IHDR header")
    width, height = struct.unpack(">II", data[16:24])
    if width == 0 or height == 0:
        raise ValueError(f"declares {width}x{height} pixels")
    return width, height


def read_plan_png(data: bytes | None) -> PlanImage:
    if not data:
        return PlanImage(None, "missing")
    if len(data) > MAX_PNG_BYTES:
        return PlanImage(None, f"unreadable: {len(data)} bytes is over the {MAX_PNG_BYTES}-byte limit")
    try:
        width, height = png_dimensions(data)
    except ValueError as exc:
        return PlanImage(None, f"unreadable: {exc}")
    if width > MAX_SIDE or height > MAX_SIDE or width * height > MAX_PIXELS:
        return PlanImage(None, f"unreadable: declares {width}x{height} pixels (limit {MAX_PIXELS} pixels, "
                               f"{MAX_SIDE} per side); not decoded", (width, height))
    try:
        from PIL import Image, PngImagePlugin

        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            # the PNG reader itself, not Image.open: open() first imports five other formats' plugins
            # (~15 ms of a one-off run) to try them, and only a PNG is accepted here
            image = PngImagePlugin.PngImageFile(io.BytesIO(data))
            if image.size != (width, height):
                raise ValueError(f"decoder sees {image.size}, header says {(width, height)}")
            image.load()
        image = image.convert("RGBA" if "A" in image.getbands() or "transparency" in image.info else "RGB")
    except Exception as exc:
        return PlanImage(None, f"unreadable: {type(exc).__name__}: {str(exc)[:120]}", (width, height))
    return PlanImage(image, f"{width}x{height} PNG", (width, height))

