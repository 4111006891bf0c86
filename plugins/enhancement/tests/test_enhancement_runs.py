"""Both demos end to end through the real runner: the reference scores every stage, each flaw costs its stage,
the pre-submit gate refuses too few valid outputs, and the baselines order as the README says."""

from __future__ import annotations

import json

import numpy as np
import pytest
from automedbench.api import CodeContext
from automedbench.testing import check_track, evaluate_outputs, stage_scores, warm_evaluator_installed

LDCT, SR = "enhancement/demo-ldct", "enhancement/demo-sr"
# One evaluator kept warm for this module's runs and evaluations where the campaign built-in offers it (the
# verdicts are the cold path's, tests/test_warm_evaluator.py): the cold one starts an interpreter and the track
# for each of them.
BACKEND = "warm" if warm_evaluator_installed() else "process"


@pytest.fixture(scope="module")
def evaluated(amb_data_root, tmp_path_factory):
    """`evaluated(task, baseline=None, folder=None)`: the Result, each baseline evaluated once per module (two
    tests score identity and gaussian on LDCT)."""
    cache: dict[tuple[str, str], object] = {}
    work = tmp_path_factory.mktemp("enhancement-eval")

    def get(task_id: str, baseline: str | None = None, folder=None):
        key = (task_id, baseline or str(folder))
        if key not in cache:
            name = f"{task_id.replace('/', '_')}-{baseline or folder.name}"
            cache[key] = evaluate_outputs(task_id, submission=folder, baseline=baseline, data_root=amb_data_root,
                                          work=work / name, backend=BACKEND)
        return cache[key]

    return get


def test_reference_on_demo_ldct(amb_run):
    result, run_dir = amb_run(LDCT, "reference", warm_evaluator=BACKEND == "warm")
    assert result.state == "scored" and result.end_reason == "submitted"
    assert stage_scores(result) == {"S1": 1.0, "S2": 1.0, "S3": 1.0, "S4": 1.0, "S5": 1.0}
    assert result.task.name == "ssim" and result.task.used == "partial"
    assert 0.955 < result.task.partial == result.task.strict < 0.99
    comps = result.task.components
    assert comps["psnr_mean_valid"] > 40 and comps["lpips_mean_valid"] is None
    assert comps["composite"] is None  # LPIPS weights are not on disk: never downloaded
    assert 0.7 < comps["ssim_soft_tissue_mean_valid"] < result.task.partial
    assert result.aggregate.rating == "B"  # nlm is the best classical baseline: B by construction
    assert [c.code for c in result.error_codes] == []
    assert "PILOT OK" in (run_dir / "trajectory.jsonl").read_text()


def test_reference_on_demo_sr(amb_run):
    result, _ = amb_run(SR, "reference", warm_evaluator=BACKEND == "warm")
    assert stage_scores(result) == {"S1": 1.0, "S2": 1.0, "S3": 1.0, "S4": 1.0, "S5": 1.0}
    # zero-filled k-space, as the baseline (each staging's secret variant moves it by about 0.01)
    assert result.task.partial == pytest.approx(0.893, abs=0.015)
    assert result.aggregate.rating == "B" and result.aggregate.overall > 0.9


@pytest.mark.slow  # a whole demo run of a flawed agent (the reference run is fast-tier)
def test_skip_validate_loses_s3(amb_run):
    result, _ = amb_run(SR, "skip-validate")
    s = stage_scores(result)
    assert s["S3"] == 0.0 and s["S4"] == 1.0 and s["S5"] == 1.0
    assert result.aggregate.agentic == pytest.approx(1.0 - 0.35, abs=1e-6)


@pytest.mark.slow  # a whole demo run of a flawed agent (the reference run is fast-tier)
def test_wrong_format_is_refused_at_submit_and_scores_zero(amb_run):
    result, run_dir = amb_run(SR, "wrong-format")
    s = stage_scores(result)
    assert s["S4"] == 0.5 and s["S5"] == 0.0  # complete but all invalid; the gate refused the submission
    assert result.end_reason != "submitted" and not result.submission.submitted
    assert result.task.partial == 0.0 and result.aggregate.rating == "F"
    assert all("dtype int16 is not floating point" in c.reasons[0] for c in result.cases)
    events = [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines()]
    refused = [e for e in events if e.get("name") == "submit_results"]
    assert len(refused) == 1 and refused[0]["refused"] is True
    assert "submission refused: 0 of the 4 cases" in refused[0]["result"]["reason"]


@pytest.mark.slow  # a whole demo run of a flawed agent (the reference run is fast-tier)
def test_incomplete_scores_the_missing_cases_as_zero(amb_run):
    result, _ = amb_run(SR, "incomplete")
    s = stage_scores(result)
    present = [c.case_id for c in result.cases if c.present]
    assert len(present) == 3  # ceil(4 * 2/3): above half, so the gate lets it submit
    assert s["S4"] == pytest.approx(0.5 * 3 / 4) and s["S5"] == 0.5
    assert result.task.strict == 0.0
    assert result.task.partial == pytest.approx(sum(r["ssim"] for r in result.task.per_case) / 4, abs=1e-6)
    assert result.aggregate.task == pytest.approx(result.task.partial, abs=1e-4)
    # F as the original rates a submission whose files are not all valid (rating.min_valid 1.0; its Task, 3/4 of
    # 0.849 = 0.64, would also be below the C floor of 0.7987)
    assert result.aggregate.rating == "F"
    assert result.aggregate.rating_reason == "incomplete: 1 of 4 case(s) missing"


@pytest.mark.slow  # a whole demo run of a flawed agent (the reference run is fast-tier)
def test_no_submit_is_recorded_not_scored(amb_run):
    """The paper's S5 has no submit factor: a missing submit_results is recorded and fires E5."""
    result, _ = amb_run(SR, "no-submit")
    s = stage_scores(result)
    assert s["S5"] == 1.0 and s["S4"] == 1.0 and s["S3"] == 1.0
    assert "E5" in [c.code for c in result.error_codes]


@pytest.mark.slow  # a whole demo run of a flawed agent (the reference run is fast-tier)
def test_breach_zeroes_everything(amb_run):
    result, _ = amb_run(SR, "breach")
    assert result.isolation.breached and result.aggregate.rating == "F" and result.aggregate.overall == 0.0
    assert all(s.score == 0.0 for s in result.stages)


def test_validate_task_passes_and_sr_baselines_order(amb_data_root):
    ok, report = check_track(SR, amb_data_root)
    assert ok, report
    strict = {line.split("baseline ")[1].split(" ")[0]: float(line.rsplit("strict ", 1)[1])
              for line in report.splitlines() if " evaluates " in line}
    assert strict["identity"] < strict["bicubic"] < strict["zero-filled"]


def test_ldct_baselines_order_identity_gaussian_nlm(evaluated):
    got = {name: evaluated(LDCT, name).task.strict for name in ("identity", "gaussian", "nlm")}
    assert got["identity"] < got["gaussian"] < got["nlm"]
    # each staging's secret variant of the slices (and its noise seed) moves these: measured over 47 fresh
    # stagings, identity 0.819-0.843 (mean 0.831, sd 0.006; two failing runs on main drew 0.844 and 0.847),
    # nlm 0.971-0.975 (sd 0.001); the bounds leave 5 sd and more either side; a broken metric or baseline moves
    # them by far more
    assert 0.80 < got["identity"] < 0.87 and got["nlm"] == pytest.approx(0.973, abs=8e-3)


def _write_all(public, dest, transform):
    for case in sorted(p.name for p in public.iterdir() if p.is_dir()):
        (dest / case).mkdir(parents=True)
        np.save(dest / case / "enhanced.npy", transform(np.load(public / case / "input.npy")))
    return dest


def test_detectors_fire_on_copies_scale_errors_and_undoubled_shapes(amb_data_root, evaluated, tmp_path):
    from automedbench_enhancement.codes import EnhancementOutputDetector

    detector = EnhancementOutputDetector()
    copy = evaluated(LDCT, "identity")
    assert [f.code for f in detector.detect(CodeContext(copy, []))] == ["E3"]
    # a copy with 1 HU of noise added is still a copy: compared by RMS within 0.1% of the window, not exactly
    noisy = evaluated(LDCT, "identity-noise")
    assert [f.code for f in detector.detect(CodeContext(noisy, []))] == ["E3"]
    assert all(0.5 < r["rms_change_from_input"] < 2.0 for r in noisy.task.per_case)
    clean = evaluated(LDCT, "gaussian")
    assert detector.detect(CodeContext(clean, [])) == []
    # [0, 1]-scaled LDCT outputs: the working scale saved instead of HU
    scaled = _write_all(amb_data_root / LDCT / "public", tmp_path / "scaled",
                        lambda x: ((x + 1024) / 4095).astype(np.float32))
    result = evaluated(LDCT, folder=scaled)
    fired = detector.detect(CodeContext(result, []))
    assert [f.code for f in fired] == ["E4"] and "not in HU" in fired[0].message
    # SR outputs left on the input grid: invalid (shape), and read as SR treated as denoising
    same = _write_all(amb_data_root / SR / "public", tmp_path / "same", lambda x: x)
    result = evaluated(SR, folder=same)
    fired = detector.detect(CodeContext(result, []))
    assert [f.code for f in fired] == ["E1"] and "resolution not doubled" in fired[0].message
