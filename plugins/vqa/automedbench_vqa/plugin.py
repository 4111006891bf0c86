"""Entry point of the VQA track: registers the track."""

from __future__ import annotations

from automedbench.api import Register, hookimpl


def _track():
    """The track, its module imported on first use (it loads Pillow: not for runs of other tracks)."""
    from .track import VQATrack

    return VQATrack()


@hookimpl
def automedbench_register_tracks(register: Register) -> None:
    register("vqa", _track, "medical visual question answering (MCQ letter / closed / open accuracy)")
