"""Entry point of the VQA track: registers the track."""

from __future__ import annotations

from automedbench.api import Register, hookimpl


@hookimpl
def automedbench_register_tracks(register: Register) -> None:
    from .track import VQATrack

    register("vqa", VQATrack, "medical visual question answering (MCQ letter / closed / open accuracy)")
