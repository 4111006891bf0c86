"""Entry point of the report-generation track: registers the track, its text metrics and error-code detectors."""

from __future__ import annotations

from typing import Any

from automedbench.api import Register, hookimpl


@hookimpl
def automedbench_register_tracks(register: Register) -> None:
    from .track import ReportTrack

    register("report_gen", ReportTrack, "chest X-ray report generation and pathology captioning (MLRG-7)")


def report_text_metric(**options: Any) -> Any:
    """Imports pycocoevalcap only when the metric is made, so listing plugins stays fast."""
    from .textmetric import ReportTextMetric

    return ReportTextMetric(**options)


@hookimpl
def automedbench_register_metrics(register: Register) -> None:
    register("report_text", report_text_metric,
             "BLEU-1..4, METEOR, ROUGE-L (pycocoevalcap, MLRG preprocessing) + rule-labeler CheXpert micro P/R/F1")


@hookimpl
def automedbench_register_code_detectors(register: Register) -> None:
    from .codes import ReportDetector

    register("report-gen", ReportDetector, "error codes, report generation: single view used, impression "
                                            "instead of findings, templated reports ignoring the image")
