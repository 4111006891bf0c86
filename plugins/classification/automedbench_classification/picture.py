"""Each case's picture for the run page: the image, with the agent's label and the gold label beside it. The label
is the one the scoring parsed with the contract's parser (size-limited JSON, canonical class names)."""

from __future__ import annotations

from pathlib import Path

from automedbench.api import CasePicture, Panel, read_image


def case_picture(public_case: Path, image_name: str, predicted: str | None, gold: str) -> CasePicture:
    panels = [Panel("image", image=read_image(public_case / image_name), role="input"),
              Panel("answer", text=predicted if predicted is not None else "(no valid prediction)", role="output"),
              Panel("gold", text=gold, role="reference")]
    verdict = "" if predicted is None else ("correct" if predicted == gold else "wrong")
    return CasePicture(panels, verdict)
