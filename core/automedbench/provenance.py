"""What a result records about the software that produced it (shared by `run` and `evaluate`)."""

from __future__ import annotations

import platform
from typing import Any

from . import __version__
from .plugins import Registry


def versions(registry: Registry, track_name: str) -> dict[str, str]:
    """Harness, Python, the track's distribution and the platform, as stored in a result's header."""
    comp = registry.get("track", track_name)
    return {"automedbench": __version__, "python": platform.python_version(),
            f"track:{comp.distribution}": comp.version, "platform": platform.platform()}


# Of a result's software versions, those that score: the harness's and the track's (never Python's or the host's)
SCORING_VERSIONS = ("automedbench", "track:")


def scoring_record(task_digest: str, software: dict[str, str], assets_digest: str = "") -> dict[str, Any]:
    """What scored a run besides its options: the task's definition (digest), the harness's and the track's
    versions and the track's pinned weights (digest). Runs of one task that differ in it are never pooled in one
    leaderboard row: a run scored by an older scorer, or made on an older task definition, is another row."""
    return {"task definition": task_digest,
            "versions": {k: v for k, v in sorted(software.items()) if k.startswith(SCORING_VERSIONS)},
            "assets": assets_digest}
