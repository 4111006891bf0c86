"""Report-generation error-code detectors (paper Table 16, report column, plus report-specific failures).

- single view used for a multi-view study (E1: one case is one study): findings that show only on a later
  view were missed in every such study, or the code reads only `image_files[0]`;
- impression instead of findings (E5: the scored section is FINDINGS): most reports have an IMPRESSION
  section and no FINDINGS section;
- templated output ignoring the image (E3: repetitive reports submitted unrevised): one text (within a word-
  overlap tolerance) for most studies;
- no report model in the plan (E1, the generic understanding code on this rubric's ids: s1_plan_md passed,
  s1_model failed).
"""

from __future__ import annotations

import re

from automedbench.api import CodeContext, Detector, FiredCode

from .text import TEMPLATE_SIMILARITY

FIRST_VIEW_ONLY = re.compile(r"image_files['\"]\]\s*\[\s*:?\s*[01]?\s*\]")
MIN_CASES_FOR_TEMPLATE = 3
TEMPLATE_SHARE = 0.8  # this share of studies or more under one template (the references' own share aside)


def templated(components: dict) -> bool:
    """Most reports are one template (compared by word overlap, so one extra word per case cannot escape)
    while the references are not: the E3 code and report generation's rating cap read the same fact."""
    share = components.get("template_share")
    cohort = components.get("reference_template_share", 0)
    return share is not None and share >= TEMPLATE_SHARE and cohort < TEMPLATE_SHARE


class ReportDetector(Detector):
    name = "report-gen"
    tracks = ("report_gen",)

    def detect(self, ctx: CodeContext) -> list[FiredCode]:
        fired = []
        if ctx.item("s1_plan_md") == 1.0 and ctx.item("s1_model") == 0.0:
            fired.append(self.fire("E1", "the plan names no report model or method (judge item s1_model failed)",
                                   [], "S1"))
        metric = ctx.result.task
        if metric is None or not metric.per_case:
            return fired
        rows = metric.per_case
        turns = ctx.last_write_turns
        fired += self._single_view(ctx, rows, turns)
        impression = [r["case_id"] for r in rows if r.get("impression_only")]
        if impression and len(impression) * 2 >= len(rows):
            fired.append(self.fire("E5", f"{len(impression)}/{len(rows)} report(s) have an IMPRESSION section but no "
                                         "FINDINGS section: the impression was scored against the reference findings",
                                   turns, "S4"))
        if templated(metric.components) and len(rows) >= MIN_CASES_FOR_TEMPLATE:
            share = metric.components["template_share"]
            fired.append(self.fire("E3", f"the same report (within {TEMPLATE_SIMILARITY:.0%} word overlap) was "
                                         f"submitted for {share:.0%} of {len(rows)} studies: templated output that "
                                         "ignores the images, not revised", turns, "S3"))
        return fired

    def _single_view(self, ctx: CodeContext, rows: list[dict], turns: list[int]) -> list[FiredCode]:
        later = [r for r in rows if r.get("views", 1) > 1 and r.get("later_view_only")]
        missed = [r["case_id"] for r in later if r.get("missed_later_view")]
        code_turns = [c["turn"] for c in ctx.trace.calls if FIRST_VIEW_ONLY.search(c.get("code", ""))]
        multi = [r for r in rows if r.get("views", 1) > 1]
        if later and len(missed) == len(later):
            return [self.fire("E1", f"findings visible only on a later view were missed in all {len(later)} such "
                                    f"multi-view studies ({', '.join(missed[:5])}): one view used per study",
                              turns + code_turns[:3], "S1")]
        if multi and code_turns:
            return [self.fire("E1", f"the code reads only the first image of each study (turns "
                                    f"{', '.join(map(str, code_turns[:3]))}) while {len(multi)} studies have "
                                    "several views", code_turns[:3], "S1")]
        return []
