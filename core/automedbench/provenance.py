"""What a result records about the software that produced it (shared by `run` and `evaluate`)."""

from __future__ import annotations

import platform
from typing import Any

from . import __version__
from .fsutil import sha256_text
from .plugins import Registry
from .serialize import dumps


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


# Prefix of the digests a run was first recorded with, kept in its header once it is graded again
RUN_PREFIX = "run_"


def regraded_hashes(hashes: dict[str, str], judge: str, judge_options: dict[str, Any], registry: Registry,
                    task: Any) -> dict[str, str]:
    """A result's digests once `rejudge` graded it again: the judge and its options are score-changing options
    (in `options` and `conditions`), and the stages are scored by this harness on `task` as installed now (in
    `scoring`), so these digests name the grading too. Kept, they pooled a run graded by a lenient judge (or by
    another harness, on another rubric) with the runs still graded as they were made.

    Derived from the run's first digests (kept as `run_options`, `run_conditions`, `run_scoring`), so grading
    again with the same judge gives the same digests however often it is done: runs graded alike pool together."""
    graded = {"judge": judge, "judge_options": judge_options}
    scored = scoring_record(sha256_text(dumps(task)), versions(registry, task.track))
    out = dict(hashes)
    for name, by in (("options", graded), ("conditions", graded), ("scoring", scored)):
        first = hashes.get(RUN_PREFIX + name) or hashes.get(name, "")
        out[RUN_PREFIX + name] = first
        out[name] = sha256_text(dumps({"run": first, "graded again by": by}))
    return out
