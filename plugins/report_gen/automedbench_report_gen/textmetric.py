"""The registered `report_text` metric: one call over a corpus of (prediction, reference) report pairs."""

from __future__ import annotations

from typing import Any

from .clinical import ClinicalScorer
from .metric import score_corpus
from .text import scored_text


class ReportTextMetric:
    """prediction/reference: one report or a list of reports; returns the corpus components and the Task value."""

    name = "report_text"

    def __init__(self, kind: str = "mlrg") -> None:
        self.kind = kind

    def __call__(self, prediction: Any, reference: Any, **options: Any) -> dict[str, float]:
        hyps = [prediction] if isinstance(prediction, str) else list(prediction)
        refs = [reference] if isinstance(reference, str) else list(reference)
        clinical = ClinicalScorer() if self.kind != "nlg3" else None
        value, components, _, case_mean = score_corpus([scored_text(r) for r in refs],
                                                       [scored_text(h) for h in hyps], self.kind, clinical)
        return {**components, "task": value, "per_case_mean": case_mean}
