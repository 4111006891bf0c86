"""Classification error-code detectors: what only label outputs show.

They read the stored run: the checker's per-case reasons (fixed phrases from contract.py) and the
metric's per-case rows. Several may fire; none changes a score.
"""

from __future__ import annotations

from collections import Counter

from automedbench.api import CodeContext, Detector, FiredCode

from .contract import ABBREVIATION, UNKNOWN_CLASS

COLLAPSE_MIN_CASES = 10  # "every prediction one class" needs this many valid cases to mean anything


class LabelDetector(Detector):
    """E4 for labels written as the model's abbreviations (the id2label -> class mapping skipped) or
    every prediction collapsed onto one class; E5 for class names the task does not have."""

    name = "classification-labels"
    tracks = ("classification",)

    def detect(self, ctx: CodeContext) -> list[FiredCode]:
        turns = ctx.last_write_turns
        found = [(c.case_id, r) for c in ctx.invalid for r in c.reasons]
        fired = []

        def cases_with(phrase: str) -> list[str]:
            return sorted({case for case, reason in found if phrase in reason})

        short = cases_with(ABBREVIATION)
        if short:
            fired.append(self.fire("E4", f"labels left as the model's abbreviations in {len(short)} case(s) "
                                         f"({', '.join(short[:3])}): id2label was not mapped onto the classes",
                                   turns, "S4"))
        unknown = cases_with(UNKNOWN_CLASS)
        if unknown:
            fired.append(self.fire("E5", f"class names not from meta.json's list in {len(unknown)} case(s) "
                                         f"({', '.join(unknown[:3])})", turns, "S4"))
        rows = ctx.result.task.per_case if ctx.result.task is not None else []
        predicted = Counter(r.get("predicted") for r in rows if r.get("valid"))
        truth = {r.get("label") for r in rows}
        if len(predicted) == 1 and sum(predicted.values()) >= COLLAPSE_MIN_CASES and len(truth) > 1:
            label = next(iter(predicted))
            fired.append(self.fire("E4", f"every prediction is {label!r} ({sum(predicted.values())} cases) while "
                                         f"the reference has {len(truth)} classes: check the preprocessing",
                                   turns, "S4"))
        return fired
