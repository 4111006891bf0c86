"""Scripted agents on the multi-label phantom demo: agent -> sandbox -> isolated evaluator -> judge."""

from __future__ import annotations

import pytest
from automedbench.testing import run_task

ML = "segmentation/demo-multilabel"


@pytest.fixture(scope="module")
def run_ml(tmp_path_factory):
    data, out = tmp_path_factory.mktemp("ml-data"), tmp_path_factory.mktemp("ml-runs")

    def _run(agent: str):
        return run_task(ML, agent, out=out, data_root=data)[0]

    return _run


def test_reference_labels_every_structure(run_ml):
    result = run_ml("reference")
    assert result.state == "scored" and result.end_reason == "submitted"
    assert all(s.score == 1.0 for s in result.stages), [(s.stage, s.score) for s in result.stages]
    comps = result.task.components
    assert result.task.strict == result.task.partial == pytest.approx(comps["macro_dice"])
    assert min(comps["dice_1_kidney"], comps["dice_2_kidney tumour"], comps["dice_3_liver"]) > 0.8
    assert result.aggregate.rating == "A"


@pytest.mark.slow  # a whole demo run of a flawed agent (the reference run is fast-tier)
def test_soft_label_maps_are_invalid(run_ml):
    result = run_ml("wrong-format")
    assert result.task.strict == 0.0 and result.aggregate.rating == "F"
    assert all(not c.valid for c in result.cases)
    assert any("non-integer values" in r for c in result.cases for r in c.reasons)


@pytest.mark.slow  # a whole demo run of a flawed agent (the reference run is fast-tier)
def test_half_the_cohort_scores_partial_only(run_ml):
    result = run_ml("incomplete")
    assert [c.present for c in result.cases] == [True, True, False, False]
    assert result.task.strict == 0.0 and 0.3 < result.task.partial < 0.6  # two missing cases count 0
