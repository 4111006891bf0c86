"""Whether the docker sandbox can run here, decided when a test first asks (never at import).

scripts/test.sh starts the docker engine and builds the images in the background while the fast tests
run; scripts/docker-up.sh writes "ready" or "unavailable: why" to $AUTOMEDBENCH_DOCKER_STATUS when done.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

DOCKER_STATUS = "AUTOMEDBENCH_DOCKER_STATUS"
DOCKER_WAIT = "AUTOMEDBENCH_DOCKER_WAIT"  # seconds a docker test waits for that file [default 1800]
REQUIRE_DOCKER = "AUTOMEDBENCH_REQUIRE_DOCKER"  # "1": a docker test fails, not skips, where no engine is usable
_docker_answer: list[str | None] = []


def _docker_status_file(wait_s: float) -> str | None:
    """The status line docker-up.sh wrote, waiting for it up to `wait_s` seconds; None where no background
    build was started (the variable is unset)."""
    path = os.environ.get(DOCKER_STATUS)
    if not path:
        return None
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return Path(path).read_text(errors="replace").strip() or "unavailable: empty status file"
        except FileNotFoundError:
            if time.monotonic() >= deadline:
                return f"unavailable: the docker engine and images were not ready after {wait_s:.0f} s"
            time.sleep(1)


def docker_unavailable(wait_s: float | None = None) -> str | None:
    """Why the docker sandbox cannot run here (None when it can). Where the engine and images are being
    prepared in the background ($AUTOMEDBENCH_DOCKER_STATUS), waits for them first (up to `wait_s`, default
    $AUTOMEDBENCH_DOCKER_WAIT or 1800 s). Asked once per process."""
    if _docker_answer:
        return _docker_answer[0]
    if wait_s is None:
        wait_s = float(os.environ.get(DOCKER_WAIT) or 1800)
    status = _docker_status_file(wait_s)
    why: str | None
    if status is not None and not status.startswith("ready"):
        why = status.removeprefix("unavailable: ")
    else:
        from automedbench.api import UserError
        from automedbench.engine import registry

        try:  # the docker sandbox is a built-in distribution: found through the registry, never imported
            ok, reason = registry().create("sandbox", "docker").available()
            why = None if ok else reason
        except (UserError, ImportError) as exc:
            why = str(exc)
            if why and status is not None:
                why = f"docker-up.sh reported the engine ready, yet: {why}"
    _docker_answer.append(why)
    return why


def needs_docker() -> None:
    """Skip the calling test (or fixture) where no docker engine with the images is usable, after waiting
    for a background build (`docker_unavailable`); fail instead with AUTOMEDBENCH_REQUIRE_DOCKER=1, or
    where docker-up.sh said the engine was ready and it is not."""
    import pytest

    why = docker_unavailable()
    if why is None:
        return
    if os.environ.get(REQUIRE_DOCKER) == "1" or why.startswith("docker-up.sh reported"):
        pytest.fail(f"docker sandbox required but unusable: {why}", pytrace=False)
    pytest.skip(f"docker: {why}")
