"""Entry point of the report-generation track: registers the track and its error-code detectors."""

from __future__ import annotations

from automedbench.api import Register, hookimpl


@hookimpl
def automedbench_register_tracks(register: Register) -> None:
    from .track import ReportTrack

    register("report_gen", ReportTrack, "chest X-ray report generation and pathology captioning (MLRG-7)")


@hookimpl
def automedbench_register_code_detectors(register: Register) -> None:
    from .codes import ReportDetector

    register("report-gen", ReportDetector, "error codes, report generation: single view used, impression "
                                            "instead of findings, templated reports ignoring the image")
