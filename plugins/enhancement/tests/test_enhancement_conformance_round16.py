"""Held-out rating cases for enhancement against the original (round 16).

The original (`eval_image_enhancement`, RUBRIC.md and `aggregate`): the rating is F "if aborted, not all files
valid, no scores, or completion < 0.5", else the first band met. Before this round our enhancement tasks rated F
only below half the cases valid (`rating.min_valid` 0.5), so perfect outputs with one case missing (the Task
(N-1)/N with the missing case counted 0) rated A or B where the original rates F: on the 100-case LDCT task
0.99 is an A. Now the rating asks for every case (`min_valid` 1.0); the pre-submit gate keeps the original's half.
"""

from __future__ import annotations

import numpy as np
import pytest
import release_layouts as layouts  # a helper module beside the tests (tests/ is not a package)
from automedbench.testing import evaluate_outputs, load_task, stage_from_folder
from automedbench_enhancement import contract

TASK = "enhancement/lidc-idri-denoising"  # 50 cases: bands 0.9925 / 0.9525 / 0.9225


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    root = tmp_path_factory.mktemp("lidc")
    track, task = load_task(TASK)
    layouts.WRITERS[TASK](root / "download", task.case_count)
    return root, stage_from_folder(track, task, root / "data", root / "download")


@pytest.mark.parametrize("missing", [0, 1])
def test_a_missing_case_rates_f_as_the_original(staged, tmp_path, missing):
    """Perfect outputs (the references) for all but `missing` cases, through `evaluate` (frozen, isolated
    evaluator, rated). The original: A with every file valid, F with any missing. Before: 49/50 = 0.98 rated B."""
    root, data = staged
    outputs = tmp_path / "outputs"
    for case_id in data.case_ids[missing:]:
        (outputs / case_id).mkdir(parents=True)
        reference = np.load(data.private / case_id / contract.REFERENCE, allow_pickle=False)
        np.save(outputs / case_id / contract.OUTPUT, reference.astype(np.float32))
    result = evaluate_outputs(TASK, data_root=root / "data", work=tmp_path / "work", submission=outputs)
    n = len(data.case_ids)
    assert result.task.partial == pytest.approx((n - missing) / n, abs=1e-6)
    expected = "A" if not missing else "F"
    assert result.aggregate.rating == expected, result.aggregate.rating_reason


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
