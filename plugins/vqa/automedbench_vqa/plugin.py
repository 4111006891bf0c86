"""Entry point of the VQA track: registers the track and its answer metric."""

from __future__ import annotations

from automedbench.api import Register, hookimpl


@hookimpl
def automedbench_register_tracks(register: Register) -> None:
    from .track import VQATrack

    register("vqa", VQATrack, "medical visual question answering (MCQ letter / closed / open accuracy)")


@hookimpl
def automedbench_register_metrics(register: Register) -> None:
    from .answers import AnswerMetric

    register("vqa_answer", AnswerMetric, "closed yes/no strict; open 0.5·exact match + 0.5·token F1")
