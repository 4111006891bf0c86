"""Detection error-code detectors: what only box outputs show (paper Table 16, detection column).

They read the stored run: the checker's per-case reasons (fixed phrases from reasons.py) and the
evaluator's diagnostic components (metric.py). Several may fire; none changes a score.
"""

from __future__ import annotations

from automedbench.api import CodeContext, Detector, FiredCode

from . import reasons

SWAP_GAIN = 2.0  # swapping x and y finds at least twice the matches, and at least 3 more


class BoxFormatDetector(Detector):
    """E5 for boxes that break the schema (unknown classes, no scores, normalised coordinates);
    E4 for a coordinate transform gone wrong (x and y swapped)."""

    name = "detection-boxes"
    tracks = ("detection",)

    def detect(self, ctx: CodeContext) -> list[FiredCode]:
        turns = ctx.last_write_turns
        fired = []
        found = [(c.case_id, r) for c in ctx.invalid for r in c.reasons]

        def cases_with(phrase: str) -> list[str]:
            return sorted({case for case, reason in found if phrase in reason})

        unknown = cases_with(reasons.UNKNOWN_CLASS)
        if unknown:
            fired.append(self.fire("E5", f"class names not from meta.json's list in {len(unknown)} case(s) "
                                         f"({', '.join(unknown[:3])})", turns, "S4"))
        swapped_invalid = cases_with(reasons.SWAP_HINT)
        metric = ctx.result.task
        rows = metric.per_case if metric is not None else []
        unscored = sorted(str(r.get("case_id")) for r in rows if (r.get("unscored_boxes") or 0) > 0)
        if unscored:
            fired.append(self.fire("E5", f"boxes without a score in {len(unscored)} case(s) "
                                         f"({', '.join(unscored[:3])}): each counts as 1.0, so their ranking is "
                                         "only the case order", turns, "S4"))
        comps = metric.components if metric is not None else {}
        normalised = comps.get("diag_normalised_cases") or 0.0
        if normalised:
            fired.append(self.fire("E5", f"boxes in normalised [0, 1] coordinates instead of pixels in "
                                         f"{int(normalised)} case(s)", turns, "S4"))
        plain, flipped = comps.get("diag_tp_agnostic") or 0.0, comps.get("diag_tp_xy_swapped") or 0.0
        if (flipped >= SWAP_GAIN * plain and flipped >= plain + 3) or swapped_invalid:
            where = (f"{int(flipped)} boxes match a reference once x and y are swapped, {int(plain)} as written"
                     if flipped > plain else f"{len(swapped_invalid)} case(s) fall outside the image but fit swapped")
            fired.append(self.fire("E4", f"x and y swapped (row/column order): {where}", turns, "S4"))
        return fired
