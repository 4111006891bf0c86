"""The pre-submit gate against the original's count (round 19).

The original (`eval_image_enhancement/docker/agent/agent_loop.py`) accepts `submit_results` once
`n_valid >= max(1, int(0.5 * N))`: half the cases rounded down, at least one. Ours asked for half rounded up, so an
odd cohort needed one more valid output than there (3 of 5, where the original accepts 2) and the agent was sent
back to work where the original's run ended. Even cohorts were already equal; they are pinned here too.
"""

from __future__ import annotations

import numpy as np
import pytest
from automedbench.testing import load_task
from automedbench_enhancement import contract


@pytest.mark.parametrize(("n", "valid", "accepted"), [
    (5, 2, True), (5, 1, False), (7, 3, True), (7, 2, False), (4, 2, True), (4, 1, False),
    (1, 1, True), (1, 0, False), (3, 1, True), (3, 0, False), (100, 50, True), (100, 49, False),
])
def test_the_gate_accepts_the_originals_count(tmp_path, n, valid, accepted):
    task = load_task("enhancement/demo-sr")[1]
    ids = [f"case_{k:03d}" for k in range(n)]
    shape = contract.output_shape(task)
    for case_id in ids[:valid]:
        (tmp_path / case_id).mkdir()
        np.save(tmp_path / case_id / contract.OUTPUT, np.zeros(shape, np.float32))
    original_accepts = valid >= max(1, int(0.5 * n))
    assert original_accepts == accepted
    refusal = contract.gate(task, ids, tmp_path)
    assert (refusal is None) == accepted, refusal
    if not accepted:
        assert f"{valid} of the {n} cases" in refusal and f"{max(1, int(0.5 * n))} needed" in refusal
