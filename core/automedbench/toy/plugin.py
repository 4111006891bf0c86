"""Hooks of the toy track: the core's entry point `toy` in the `automedbench` group."""

from __future__ import annotations

from automedbench.api import Register, hookimpl


@hookimpl
def automedbench_register_tracks(register: Register) -> None:
    from .track import ToyTrack

    register("toy", ToyTrack, "toy vowel-counting track: the core's offline example and the engine's test track")
