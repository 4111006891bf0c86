"""Red-team attacks run end to end on the plain local backend (no isolation: its gaps are declared in
tests/redteam_runs.py, which holds the attacks). The attacks on the evaluator's environment or on the
evaluation keep the cold evaluator here, the others are scored by the warm one (COLD_ON_PLAIN there)."""

from __future__ import annotations

import pytest
from redteam_runs import *  # noqa: F403 - the shared tests and their `world` fixture (its __all__), collected here

# A full run per attack: minutes; scripts/test.sh runs it in the slow tier.
pytestmark = pytest.mark.slow
BACKEND = "local-plain"
