"""S5's evidence and the rating against the original's stage rules (round 20).

The original (`eval_det2d/aggregate.py`) gives S5's first half when some image was completed and the mAP is
above 0 (`has_valid_results`), and rates by the mAP's medal alone; its matching and AP use every box whatever its
score. A true positive at any score lifts AP above 0 (101-point AP samples recall 0), so S5's evidence here is
"a true positive in a case", the box's score left aside. Before this round the evidence asked for a box scored
>= the task's operating point (0.5): correct boxes scored 0.3 (mAP 1.0, the original's S5 1.0 and A) read S5 0.5
and rated F ("no case shows positive metric evidence").
"""

from __future__ import annotations

import json

import pytest
from automedbench.testing import evaluate_outputs, stage_task
from automedbench_detection.data.staged import read_truth
from test_detection_conformance_round18 import _submit

DEMO = "detection/demo"


def _stage(result, name: str):
    return next(s for s in result.stages if s.stage == name)


@pytest.mark.parametrize("score", [0.3, 0.05])
def test_low_scored_true_positives_are_evidence_as_the_original(amb_data_root, tmp_path, score):
    """Every reference box at a score below the operating point: mAP 1.0, S5 = 0.5·[mAP > 0] + 0.5·[all valid]
    = 1.0 and the medal A, as the original; before: S5 0.5, rated F."""
    staged = stage_task(DEMO, amb_data_root)
    outputs = _submit(staged, tmp_path / "outputs", lambda c: c, score)
    result = evaluate_outputs(DEMO, data_root=amb_data_root, work=tmp_path / "w", submission=outputs)
    assert result.task.strict == pytest.approx(1.0)
    assert _stage(result, "S5").score == 1.0
    assert result.aggregate.rating == "A", result.aggregate.rating_reason


def test_one_low_scored_hit_alone_is_evidence(amb_data_root, tmp_path):
    """One reference box found at score 0.1 in one image, every other image answered with no box: the mAP is
    small but above 0, so the original's S5 is 1.0 and its medal C (below 0.30); an empty submission stays F."""
    staged = stage_task(DEMO, amb_data_root)
    outputs = tmp_path / "outputs"
    hit = None
    for case_id in staged.case_ids:
        boxes = []
        truth = read_truth(staged.private / case_id)["boxes"]
        if hit is None and truth:
            hit = case_id
            boxes = [{"class": truth[0]["class"], "score": 0.1, **{k: truth[0][k] for k in ("x1", "y1", "x2", "y2")}}]
        (outputs / case_id).mkdir(parents=True, exist_ok=True)
        (outputs / case_id / "prediction.json").write_text(json.dumps({"boxes": boxes}))
    result = evaluate_outputs(DEMO, data_root=amb_data_root, work=tmp_path / "w", submission=outputs)
    assert 0.0 < result.task.strict < 0.30
    s5 = _stage(result, "S5")
    assert s5.score == 1.0 and s5.items[0].evidence_cases == [hit]
    assert result.aggregate.rating == "C", result.aggregate.rating_reason

    for case_id in staged.case_ids:
        (outputs / case_id / "prediction.json").write_text(json.dumps({"boxes": []}))
    empty = evaluate_outputs(DEMO, data_root=amb_data_root, work=tmp_path / "w2", submission=outputs)
    assert _stage(empty, "S5").score == 0.5 and empty.aggregate.rating == "F"
