"""Hooks of the toy track (registered by tests through `automedbench.testing.register_toy_track`)."""

from __future__ import annotations

from ..api import Register, hookimpl


@hookimpl
def automedbench_register_tracks(register: Register) -> None:
    from .track import ToyTrack

    register("toy", ToyTrack, "toy vowel-counting track for tests (pure Python)")
