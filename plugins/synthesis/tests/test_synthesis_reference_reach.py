"""Conformance: no file a sandbox can read gives away the synthesis track's demo references (the same bytes, the
same long text, or an image closer to a reference than the case's own input), whatever the staging's seed."""

from __future__ import annotations

import pytest
from automedbench.testing import reference_leaks

DEMOS = ["synthesis/demo", "synthesis/demo-mrct"]


@pytest.mark.parametrize("task_id", DEMOS)
def test_no_sandbox_readable_file_reveals_a_reference(task_id, amb_data_root):
    assert reference_leaks(task_id, amb_data_root) == []
