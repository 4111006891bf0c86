"""AutoMedBench's test kit: what only tests and conformance checks need (automedbench-testkit).

`automedbench.testing` is the public face tracks' tests import; it forwards the names below here, each
loaded from its module on first use (a test module naming `needs` does not load the leak search).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# Name -> the module of this package that holds it.
EXPORTS: dict[str, str] = {
    "SANDBOX_CHECKS": "sandbox_checks:CHECKS", "CheckResult": "sandbox_checks", "check_sandbox": "sandbox_checks",
    "find_reference_leaks": "leaksearch",
    "StepsAgent": "agents", "register_agent": "agents",
    "check_track": "checks", "check_download": "checks", "reference_leaks": "checks",
    "load_solution_script": "checks",
    "docker_unavailable": "dockercheck", "needs_docker": "dockercheck",
    "needs": "markers", "sampled": "markers", "full_check": "markers",
    "validate": "validation",
    "check_stager": "stagercheck", "stager_report": "stagercheck",
    "assert_stager_conforms": "stagercheck", "STAGER_CHECKS": "stagercheck",
}


def __getattr__(name: str) -> Any:
    where = EXPORTS.get(name)
    if where is None:
        raise AttributeError(f"module automedbench_testkit has no attribute {name!r}")
    module, _, attr = where.partition(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), attr or name)


__all__ = sorted(EXPORTS)
