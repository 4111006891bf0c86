"""plan.png as the judges see it: checked by its header before any pixel is decoded, then downscaled.

plan.png is written by the agent. A PNG declaring ~89 million pixels (just under PIL's own bomb limit)
cost the harness 0.8 GB to decode, and a corrupt one, sent as-is, made the model API refuse the judge
call (S1–S3 null, the run off the leaderboard). So: the byte size and the IHDR dimensions are checked
first against small caps, only then is the image decoded, and a model judge gets a re-encoded,
downscaled copy, never the agent's bytes (automedbench-models' `llm_judge.png_for_model`). Anything
that fails is evidence ("plan.png unreadable: ..."), not a judge failure.
"""

from __future__ import annotations

import functools
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



MIN_SIDE = 64  # a diagram narrower or lower than this holds no readable box
# s1f: a diagram is drawn on a canvas, one colour over at least this share of the image (the reference plans'
# is ~70%, matplotlib or graphviz flowcharts' more); random pixels or a gradient have no colour over 1%
MIN_CANVAS = 0.2
CANVAS_STEP = 32  # per channel: 8 steps, so a full-range gradient's largest share is 1/8


def png_problem(data: bytes | None) -> str | None:
    """Why plan.png is no image a diagram could be (missing, undecodable, too small), or None. The rules judge's
    s1e and the harness's bound on every judge's s1e/s1f: eight signature bytes are no picture."""
    return image_problem(read_plan_png(data))


def image_problem(found: PlanImage) -> str | None:
    """`png_problem` of a plan.png already read."""
    if found.image is None:
        return f"plan/plan.png {found.note}"
    w, h = found.image.size  # type: ignore[attr-defined]
    if min(w, h) < MIN_SIDE:
        return f"plan.png is {w}x{h}: too small to be a diagram"
    return None


def diagram_problem(image: object) -> tuple[str | None, int, float]:
    """(why a decoded plan.png is no diagram: noise, a gradient or a blank page; else None, its colour count,
    its background's share): a structural check, the same for the rules judge and the bound on every judge."""
    small = image.convert("RGB").resize((128, 128))  # type: ignore[attr-defined]
    colours = small.getcolors(maxcolors=128 * 128) or []
    dominant = max(count for count, _ in colours) / (128 * 128) if colours else 1.0
    # the canvas counted in coarse colour steps: a photographed whiteboard or a gently shaded background has
    # no exact colour over 1%, yet one step holds most of it (noise or a full-range gradient spreads over many)
    coarse = small.point(lambda v: v // CANVAS_STEP).getcolors(maxcolors=128 * 128) or []
    canvas = max(count for count, _ in coarse) / (128 * 128) if coarse else 1.0
    if canvas < MIN_CANVAS:  # boxes and arrows drawn on a canvas: noise or a gradient has none
        return (f"plan.png has no background canvas (largest colour band {canvas:.0%} of the image, a "
                f"diagram's is at least {MIN_CANVAS:.0%}): noise or a gradient, not a diagram"), len(colours), dominant
    if len(colours) >= 3 and dominant < 0.97:
        return None, len(colours), dominant
    return f"plan.png looks blank ({len(colours)} colours, background {dominant:.0%})", len(colours), dominant


PLAN_KEY = "_plan_png"  # where `plan_reading` keeps a judge input's plan.png, read (never sent to a model)


class PlanReading:
    """One judge input's plan.png, decoded at most once and only when an item asks: the rules judge's s1e and s1f
    and the bound on every judge each decoded it again (a Lite run, which grades neither, decoded it too)."""

    def __init__(self, data: bytes | None) -> None:
        self.data = data

    @functools.cached_property
    def found(self) -> PlanImage:
        return read_plan_png(self.data)

    @functools.cached_property
    def problem(self) -> str | None:
        """`png_problem`: why it is no image a diagram could be, or None."""
        return image_problem(self.found)

    @functools.cached_property
    def diagram(self) -> tuple[str | None, int, float] | None:
        """`diagram_problem` of the decoded image; None when it did not decode."""
        return None if self.found.image is None else diagram_problem(self.found.image)


def plan_reading(data: bytes | None, memo: dict) -> PlanReading:
    """The reading of `data` kept in `memo` (a judge input's extra), made on first use."""
    held = memo.get(PLAN_KEY)
    if isinstance(held, PlanReading) and held.data is data:
        return held
    memo[PLAN_KEY] = reading = PlanReading(data)
    return reading
