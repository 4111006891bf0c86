"""A perfect detector keeps its positive evidence where every image shows the same anatomy in the same place.

Round 39's own-vs-other-images count took boxes that match other images' references about as often as their own
for boxes placed without looking. On the release layouts' fixtures (and on dental panoramics or wrists, where the
structures sit in one place in every image) the references themselves match across images: the perfect baseline
was rated F. The count now judges only boxes many times the references (a grid, a scatter)."""

from __future__ import annotations

from automedbench.api import MetricBlock
from automedbench.testing import load_task


def _block(matched: float, chance: float, predicted: float, gt: float, per_case: list[dict]) -> MetricBlock:
    comps = {"matched": matched, "matched_by_chance": chance, "matched_at_threshold": matched,
             "matched_at_threshold_by_chance": chance, "predicted_boxes": predicted, "gt_boxes": gt}
    return MetricBlock("map", 0.5, 0.5, components=comps, per_case=per_case)


def test_boxes_as_many_as_the_references_keep_evidence_when_anatomy_aligns():
    track, task = load_task("detection/demo")
    rows = [{"case_id": f"c{i}", "tp": 4, "tp_at_threshold": 4, "fp_at_threshold": 0} for i in range(72)]
    aligned = _block(288.0, 288.0, 288.0, 288.0, rows)  # the bccd fixture's perfect baseline: 288 vs 288
    assert track.no_positive_evidence(task, aligned) is None


def test_a_dense_grid_is_still_placed_without_looking():
    track, task = load_task("detection/demo")
    rows = [{"case_id": f"c{i}", "tp": 5, "tp_at_threshold": 5, "fp_at_threshold": 3900} for i in range(12)]
    grid = _block(339.0, 339.0, 12 * 3905.0, 60.0, rows)
    assert track.no_positive_evidence(task, grid) is not None
    below = [{"case_id": f"c{i}", "tp": 5, "tp_at_threshold": 0, "fp_at_threshold": 0} for i in range(12)]
    quiet = MetricBlock("map", 0.01, 0.01, per_case=below, components={
        "matched": 339.0, "matched_by_chance": 339.0, "matched_at_threshold": 0.0,
        "matched_at_threshold_by_chance": 0.0, "predicted_boxes": 12 * 3905.0, "gt_boxes": 60.0})
    assert track.no_positive_evidence(task, quiet) is not None  # the grid scored below the operating point
