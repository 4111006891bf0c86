"""Segmentation error-code detectors: what only mask tasks can show (paper Table 16, segmentation column)."""

from __future__ import annotations

from automedbench.api import CodeContext, Detector, FiredCode

LOW_DICE = 0.1  # a lesion mask this far off the reference is empty or misplaced, not merely imprecise


class LesionMaskDetector(Detector):
    """E1 when no case gets any lesion overlap (organ-only method); E3 when empty/misplaced masks went out."""

    name = "segmentation-lesion"
    tracks = ("segmentation",)

    def detect(self, ctx: CodeContext) -> list[FiredCode]:
        metric = ctx.result.task
        if metric is None:
            return []
        positive = [c for c in metric.per_case if c.get("lesion_positive") and c.get("lesion_dice") is not None]
        if not positive:
            return []
        low = [c["case_id"] for c in positive if c["lesion_dice"] < LOW_DICE]
        organ = [c["organ_dice"] for c in positive if c.get("organ_dice") is not None]
        turns = ctx.last_write_turns
        fired = []
        if len(low) == len(positive) and organ and min(organ) >= 0.5:
            fired.append(self.fire("E1", f"organ segmented (Dice >= 0.5) but no lesion found in any of "
                                         f"{len(positive)} tumour-positive case(s): the method does not "
                                         "predict the lesion target", turns, "S1"))
        if low:
            fired.append(self.fire("E3", f"lesion masks empty or misplaced (Dice < {LOW_DICE}) in "
                                         f"{len(low)}/{len(positive)} tumour-positive case(s) and submitted "
                                         f"unrepaired: {', '.join(low[:5])}", turns, "S3"))
        return fired
