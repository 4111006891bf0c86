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
from typing import TYPE_CHECKING

from attrs import define

if TYPE_CHECKING:
    from .judge import JudgeInput

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


@define(frozen=True)
class PlanChecks:
    """What the rules judge and the harness's bound read of one plan.png, from one decode: why it is no image a
    diagram could be (`problem`: missing, undecodable, too small; the rules judge's s1e and the bound on every
    judge's s1e/s1f: eight signature bytes are no picture), its size, and the structural check of the decoded
    image (`diagram`: `diagram_problem`'s answer; None where it does not decode)."""

    problem: str | None
    diagram: tuple[str | None, int, float] | None
    size: tuple[int, int] = (0, 0)


def plan_checks(data: bytes | None) -> PlanChecks:
    """The checks of plan.png's bytes, from one decode (`plan_checks_of` keeps them with a judge input)."""
    found = read_plan_png(data)
    if found.image is None:
        return PlanChecks(f"plan/plan.png {found.note}", None, found.size)
    w, h = found.image.size  # type: ignore[attr-defined]
    problem = f"plan.png is {w}x{h}: too small to be a diagram" if min(w, h) < MIN_SIDE else None
    return PlanChecks(problem, diagram_problem(found.image), (w, h))


CHECKS_KEY = "_plan_checks"  # where `plan_checks_of` keeps a judge input's reading (never sent to a model)


def plan_checks_of(inp: JudgeInput) -> PlanChecks:
    """The judge input's plan.png checked once: the rules judge's s1e and s1f and the harness's bound on any
    judge's verdict (`verdictcaps`) each decoded the same bytes (three decodes and two structural checks a run)."""
    held = inp.extra.get(CHECKS_KEY)
    if isinstance(held, tuple) and len(held) == 2 and held[0] is inp.plan_png and isinstance(held[1], PlanChecks):
        return held[1]
    checks = plan_checks(inp.plan_png)
    inp.extra[CHECKS_KEY] = (inp.plan_png, checks)
    return checks


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
