"""What a result records about the software that produced it (shared by `run` and `evaluate`)."""

from __future__ import annotations

import platform

from . import __version__
from .plugins import Registry


def versions(registry: Registry, track_name: str) -> dict[str, str]:
    """Harness, Python, the track's distribution and the platform, as stored in a result's header."""
    comp = registry.get("track", track_name)
    return {"automedbench": __version__, "python": platform.python_version(),
            f"track:{comp.distribution}": comp.version, "platform": platform.platform()}
