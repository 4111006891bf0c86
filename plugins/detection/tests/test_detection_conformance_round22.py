"""Hostile-but-legal prediction files against the original checker (round 22), through `automedbench evaluate`.

The original (`eval_det2d/format_checker.py::_check_single_box`) takes any JSON number as a coordinate or a score
and compares it in Python, so an integer literal beyond float's range (`1` followed by 400 zeros) is a box
outside the image there, and its file invalid. Ours converted it with `float()`, which raised `OverflowError`:
the case still ended invalid, but through the evaluator's "checker error" path with no reason the agent could
act on. Now such a number is "not a finite number" (a coordinate) or a score outside [0, 1], as any other bad
value. Measured against the original's checker on 27 generated files (bounds, zero and negative area, xywh keys,
class ids as numbers and strings, scores > 1, negative, null, as text or missing, duplicates, extra keys, NaN, a
BOM): validity equal except the documented known-names rule of per-class tasks (README, "detection files") and
JSON `true`/`false` as a coordinate or score (Python reads them as 1/0 there; refused here, left as it is).
"""

from __future__ import annotations

import json

from automedbench.testing import evaluate_outputs, stage_task
from automedbench_detection.contract import Meta, parse_prediction
from automedbench_detection.data.staged import read_truth

DEMO = "detection/demo"
HUGE = "1" + "0" * 400  # a JSON integer no float holds


def _exact(staged, case_id: str) -> list[dict]:
    truth = read_truth(staged.private / case_id)["boxes"]
    return [{"class": b["class"], "score": 0.9, **{k: b[k] for k in ("x1", "y1", "x2", "y2")}} for b in truth]


def test_a_coordinate_beyond_float_range_is_an_ordinary_invalid_box(amb_data_root, tmp_path):
    """Every case exact but one, whose extra box has x2 = 10**400: that case invalid with the coordinate's reason
    (before: "checker error: OverflowError"), every other case valid, the partial Task below 1."""
    staged = stage_task(DEMO, amb_data_root)
    outputs = tmp_path / "outputs"
    bad = staged.case_ids[1]
    for case_id in staged.case_ids:
        (outputs / case_id).mkdir(parents=True)
        text = json.dumps({"boxes": _exact(staged, case_id)})
        if case_id == bad:
            text = text[:-2] + ', {"class": "RBC", "score": 0.5, "x1": 1, "y1": 1, "x2": ' + HUGE + ', "y2": 5}]}'
        (outputs / case_id / "prediction.json").write_text(text)
    result = evaluate_outputs(DEMO, data_root=amb_data_root, work=tmp_path / "w", submission=outputs)
    verdicts = {c.case_id: c for c in result.cases}
    assert not verdicts[bad].valid
    assert "x2 missing or not a finite number" in " ".join(verdicts[bad].reasons), verdicts[bad].reasons
    assert not any("checker error" in r for r in verdicts[bad].reasons)
    assert all(c.valid for cid, c in verdicts.items() if cid != bad)
    assert result.task.strict == 0.0 and 0.0 < result.task.partial < 1.0


def test_a_score_beyond_float_range_is_a_score_outside_the_range(tmp_path):
    path = tmp_path / "prediction.json"
    path.write_text('{"boxes": [{"class": "RBC", "score": ' + HUGE + ', "x1": 1, "y1": 1, "x2": 9, "y2": 9}]}')
    parsed = parse_prediction(path, Meta(64, 64, ["RBC", "WBC", "Platelets"]))
    assert not parsed.valid and "score outside [0, 1]" in parsed.reasons[0], parsed.reasons
