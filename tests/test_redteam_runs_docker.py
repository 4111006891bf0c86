"""Red-team attacks run end to end on the docker backend (tests/redteam_runs.py holds the attacks): in
scripts/test.sh's slow tier, after the background image build."""

from __future__ import annotations

import pytest
from redteam_runs import *  # noqa: F403 - the shared tests and their `world` fixture (its __all__), collected here

# A full run per attack: minutes; the docker tests wait for the images
pytestmark = [pytest.mark.slow, pytest.mark.docker]
BACKEND = "docker"
