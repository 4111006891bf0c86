"""inspect_ai's entry point (group `inspect_ai`): importing this registers the `automedbench` sandbox environment,
the solvers, the scorer and every installed AutoMedBench task under `automedbench_inspect/`."""

from __future__ import annotations

from .sandboxenv import AutoMedBenchSandbox
from .tasks import (
    automedbench,
    automedbench_agent,
    automedbench_brief,
    automedbench_scorer,
    execute_code,
    register_all,
    replay,
    scored_mean,
    submit_results,
)

register_all()

__all__ = ["AutoMedBenchSandbox", "automedbench", "automedbench_agent", "automedbench_brief", "automedbench_scorer",
           "execute_code", "replay", "scored_mean", "submit_results"]
