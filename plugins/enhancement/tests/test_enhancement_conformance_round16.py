"""Held-out rating cases for enhancement against the original (round 16).

The original (`eval_image_enhancement`, RUBRIC.md and `aggregate`): the rating is F "if aborted, not all files
valid, no scores, or completion < 0.5", else the first band met. Before this round our enhancement tasks rated F
only below half the cases valid (`rating.min_valid` 0.5), so on the 100-case LDCT task a submission of perfect
outputs with one case missing (Task 0.99 with the missing case counted 0) rated A where the original rates F.
Now the rating asks for every case (`min_valid` 1.0); the pre-submit gate keeps the original's half.
"""

from __future__ import annotations

import numpy as np
import pytest
from automedbench import scoring
from automedbench.api import CaseVerdict, Evaluation, MetricBlock
from automedbench.testing import load_task
from automedbench_enhancement import contract

TASKS = [f"enhancement/{name}" for name in ("ldct", "mri-sr", "lidc-idri-denoising", "deeplesion-denoising",
                                             "brats-t1c-sr", "ixi-t1-sr", "nih-cxr-sr", "demo-ldct", "demo-sr")]


def original_letter(valid: int, expected: int, ssim_bands: tuple[float, float, float], task_value: float) -> str:
    """The original's rule on SSIM (its PSNR half is held: README): F unless every file is valid, else A/B/C."""
    if valid < expected:
        return "F"
    good, okay, floor = ssim_bands
    return "A" if task_value >= good else "B" if task_value >= okay else "C" if task_value >= floor else "F"


@pytest.mark.parametrize("task_id", TASKS)
@pytest.mark.parametrize("missing", [0, 1, 2])
def test_a_missing_case_rates_f_as_the_original(task_id, missing):
    task = load_task(task_id)[1]
    n = task.case_count
    cases = [CaseVerdict(f"c{i}", i < n - missing, i < n - missing) for i in range(n)]
    value = (n - missing) / n  # perfect outputs, the missing ones counted 0 (the partial Task)
    metric = MetricBlock("ssim", value if not missing else 0.0, value, task.task_score)
    evaluation = Evaluation(task.id, n, n - missing, n - missing, cases, metric)
    letter, reason = scoring.rate(evaluation, metric, task.rating, False, positive_cases=n - missing)
    bands = (task.rating.good, task.rating.okay, task.rating.floor)
    assert letter == original_letter(n - missing, n, bands, metric.value), (task_id, missing, reason)


def test_the_gate_keeps_the_originals_half(tmp_path):
    """submit_results is still accepted once half the cases are valid (the original's gate), though the rating
    will be F until every case is."""
    task = load_task("enhancement/demo-sr")[1]
    ids = ["a", "b", "c", "d"]
    shape = contract.output_shape(task)
    for case_id in ids[:2]:
        (tmp_path / case_id).mkdir()
        np.save(tmp_path / case_id / contract.OUTPUT, np.zeros(shape, np.float32))
    assert contract.gate(task, ids, tmp_path) is None
    (tmp_path / "b" / contract.OUTPUT).unlink()
    assert "1 of the 4 cases" in contract.gate(task, ids, tmp_path)
