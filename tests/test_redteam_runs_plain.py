"""Red-team attacks run end to end on the plain local backend (no isolation: its gaps are declared in
tests/redteam_runs.py, which holds the attacks; the evaluator here stays on the cold path)."""

from __future__ import annotations

import pytest
from redteam_runs import (  # noqa: F401 - the shared tests and their fixture, collected in this file
    test_attack_specific_outcomes,
    test_attack_through_the_real_runner,
    test_benign_agent_is_never_zeroed,
    test_cleanup_survives_deep_chains,
    test_full_disk_still_writes_the_result,
    test_quota_keeps_partial_work,
    test_require_isolation_refuses_plain,
    world,
)

# A full run per attack: minutes; scripts/test.sh runs it in the slow tier.
pytestmark = pytest.mark.slow
BACKEND = "local-plain"
