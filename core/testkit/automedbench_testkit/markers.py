"""pytest markers for optional packages and for slow per-task checks that a release run does in full."""

from __future__ import annotations

import os
from importlib.util import find_spec
from typing import Any

import pytest

ALL_LAYOUT_CHECKS = "AUTOMEDBENCH_ALL_LAYOUT_CHECKS"
# A slow check that the default test run leaves to a release check (AUTOMEDBENCH_ALL_LAYOUT_CHECKS=1).
full_check = pytest.mark.skipif(os.environ.get(ALL_LAYOUT_CHECKS) != "1",
                                reason=f"a sample runs by default; {ALL_LAYOUT_CHECKS}=1 runs every case")


def needs(*modules: str, reason: str = "") -> Any:
    """A skip marker for tests that need optional packages, decided WITHOUT importing them (a test module
    that imports torch, transformers or an SDK at collection costs seconds for every test run)."""
    missing = [m for m in modules if find_spec(m) is None]
    return pytest.mark.skipif(bool(missing), reason=reason or f"not installed: {', '.join(missing)}")


def sampled(values: list[Any], keep: int = 1) -> list[Any]:
    """Parameters for a slow per-task check: the first `keep` always run, the rest only with
    AUTOMEDBENCH_ALL_LAYOUT_CHECKS=1 (full-size download copies of every task, fresh-venv installs of
    every track, cost most of an hour on two cores; the default run checks a sample, a release all)."""
    return [v if i < keep else pytest.param(*(v if isinstance(v, tuple) else (v,)), marks=full_check)
            for i, v in enumerate(values)]
