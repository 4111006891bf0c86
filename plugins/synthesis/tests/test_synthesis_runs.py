"""Both demos end to end through the real runner: the reference scores A or B at every tier, the input copy and
the other trivial baselines stay below B, and the flawed variants cost their stages."""

from __future__ import annotations

import pytest
from automedbench.testing import stage_scores, stage_task
from automedbench_synthesis.baselines import TRIVIAL, write_baseline
from automedbench_synthesis.metric import SynthesisEvaluation
from automedbench_synthesis.track import SynthesisTrack, input_floor

CTSR, MRCT = "synthesis/demo", "synthesis/demo-mrct"
TRACK = SynthesisTrack()


def task(task_id):
    return next(t for t in TRACK.tasks() if t.id == task_id)


def test_reference_on_the_ct_sr_demo(amb_run):
    result, run_dir = amb_run(CTSR, "reference")
    assert result.state == "scored" and result.end_reason == "submitted"
    assert stage_scores(result) == {"S1": 1.0, "S2": 1.0, "S3": 1.0, "S4": 1.0, "S5": 1.0}
    comps = result.task.components
    assert result.task.partial == result.task.strict > comps["ssim_identity_mean"] + 0.004  # better than the input
    assert comps["gain_over_input"] > 0.004 and comps["psnr_mean_valid"] > 35
    assert result.aggregate.rating in ("A", "B")
    assert [c.code for c in result.error_codes] == []
    assert "PILOT OK" in (run_dir / "trajectory.jsonl").read_text()


@pytest.mark.parametrize("tier", ["lite", "standard", "pro"])
def test_reference_on_the_mr_ct_demo_at_every_tier(amb_run, tier):
    result, _ = amb_run(MRCT, "reference", tier=tier)
    assert stage_scores(result)["S3"] == 1.0 and stage_scores(result)["S5"] == 1.0
    assert result.aggregate.rating in ("A", "B") and result.task.partial > 0.8
    comps = result.task.components
    assert comps["ssim_identity_mean"] < 0.2 and comps["mae_hu_mean_valid"] < 150


@pytest.mark.parametrize("task_id", [CTSR, MRCT])
def test_every_trivial_baseline_stays_below_b(amb_data_root, tmp_path, task_id):
    spec, staged = task(task_id), stage_task(task_id, amb_data_root)
    seen = {}
    for name in TRIVIAL:
        write_baseline(spec, name, staged, tmp_path / name)
        evaluation = SynthesisEvaluation(spec, staged)
        scores = [evaluation.score_case(c, tmp_path / name / c) for c in staged.case_ids]
        block = evaluation.aggregate(scores, staged.case_ids)
        bands = input_floor(spec, block)
        seen[name] = block.partial
        assert block.partial < bands.okay, (name, block.partial, bands)
    if task_id == CTSR:  # the input is a linear interpolation: re-interpolating it linearly gives it back
        assert seen["trilinear"] == pytest.approx(seen["identity"], abs=1e-4)
        assert seen["nearest"] < seen["identity"] and seen["constant"] < 0.5


def test_normalised_output_is_valid_but_scores_low_and_fires_e4(amb_run):
    result, _ = amb_run(MRCT, "wrong-format")
    assert all(c.valid for c in result.cases) and result.task.partial < 0.5
    assert result.aggregate.rating == "C" and "E4" in [c.code for c in result.error_codes]


def test_incomplete_is_completion_adjusted(amb_run):
    result, _ = amb_run(MRCT, "incomplete")
    assert sum(c.present for c in result.cases) == 3 and result.task.strict == 0.0
    comps = result.task.components
    assert result.task.partial == pytest.approx(comps["ssim_mean_valid"] * 3 / 4, abs=1e-6)
    assert stage_scores(result)["S4"] == pytest.approx(0.5 * 3 / 4)


def test_skip_validate_loses_s3(amb_run):
    result, _ = amb_run(MRCT, "skip-validate")
    assert stage_scores(result)["S3"] == 0.0 and stage_scores(result)["S4"] == 1.0
