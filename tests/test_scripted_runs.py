"""End-to-end runs of every scripted agent on the phantom demo: each flaw costs the stage it should."""

from __future__ import annotations

import json

import pytest
from automedbench.records import Result
from automedbench.serialize import read_json
from automedbench.trajectory import read_events


def scores(result) -> dict[str, float | None]:
    return {s.stage: s.score for s in result.stages}


@pytest.fixture(scope="module")
def flawed(run_agent):
    """A flawed variant's run (or the reference at another tier), scored on the warm evaluator where the campaign
    built-in offers it, as every run is by default (the verdicts are the cold path's, tests/test_warm_evaluator.py).
    With the default options, the cache key of `run_agent`: test_codes_detectors.py, in the same file group
    (tests/file_order.py), reads the same runs of the same variants instead of running them again."""
    return lambda agent, tier="lite": run_agent(agent, tier)


def test_reference_run_is_competent(run_agent):
    result, run_dir = run_agent("reference")
    s = scores(result)
    assert result.state == "scored" and result.end_reason == "submitted"
    assert all(s[k] is not None and s[k] > 0 for k in ("S1", "S2", "S3", "S4", "S5")), s
    assert s["S3"] == 1.0 and s["S4"] == 1.0 and s["S5"] == 1.0
    assert result.aggregate.overall > 0.5
    assert result.task.strict == result.task.partial > 0.6
    assert result.aggregate.rating == "A"
    # the stored record round-trips and equals what the run returned
    assert read_json(run_dir / "result.json", Result) == result


def test_reference_standard_tier_grades_plan_png(flawed):
    result, _ = flawed("reference", "standard")
    items = {i.id: i for s in result.stages for i in s.items}
    assert not items["s1e_plan_png"].auto and items["s1e_plan_png"].value == 1.0
    assert items["s1d_researched_3"].value == 1.0
    assert items["s1f_plot_pipeline"].value == 1.0


def test_skip_validate_loses_s3_only(run_agent, flawed):
    ref, _ = run_agent("reference")
    result, _ = flawed("skip-validate")
    s = scores(result)
    assert s["S3"] == 0.0
    assert s["S4"] == 1.0 and s["S5"] == 1.0 and s["S1"] == scores(ref)["S1"]
    assert result.aggregate.agentic == pytest.approx(ref.aggregate.agentic - 0.35, abs=1e-6)


def test_batch_first_loses_s3_only(run_agent, flawed):
    """The whole cohort before any pilot or check (issue 24's "batch first"): the pilot and checks that follow
    earn nothing in S3; the outputs themselves are the reference's."""
    ref, _ = run_agent("reference")
    result, _ = flawed("batch-first")
    s = scores(result)
    assert s["S3"] == 0.0
    assert s["S4"] == s["S5"] == 1.0 and s["S1"] == scores(ref)["S1"] and s["S2"] == scores(ref)["S2"]
    assert result.task.strict == pytest.approx(ref.task.strict)


def test_wrong_format_fails_inference_and_task(flawed):
    result, _ = flawed("wrong-format")
    s = scores(result)
    assert s["S4"] == 0.5  # complete but not all valid
    # one tumour-free case stays valid (an all-zero soft lesion map) and its organ Dice > 0 is positive evidence
    assert s["S5"] == 0.5
    s5 = {i.id: i.value for i in result.stage("S5").items}
    assert s5 == {"s5_positive_evidence": 1.0, "s5_all_valid": 0.0}
    assert result.task.strict == 0.0 and result.aggregate.rating == "F"
    reasons = " ".join(r for c in result.cases for r in c.reasons)
    assert "non-integer values" in reasons


def test_incomplete_fails_completion(flawed):
    result, _ = flawed("incomplete")
    s = scores(result)
    assert s["S4"] == pytest.approx(0.5 * 2 / 5)
    assert s["S5"] == 0.5
    assert result.task.strict == 0.0 < result.task.partial
    assert result.aggregate.rating == "F" and "incomplete" in result.aggregate.rating_reason


def test_no_submit_is_recorded_and_fires_e5_but_keeps_s5(run_agent, flawed):
    ref, _ = run_agent("reference")
    result, _ = flawed("no-submit")
    s = scores(result)
    assert result.end_reason == "agent_stopped"
    assert s["S5"] == 1.0 and s["S4"] == 1.0 and s["S3"] == 1.0  # the paper's S5 has no submit factor
    assert result.aggregate.agentic == ref.aggregate.agentic
    assert result.submission.submitted is False
    assert "E5" in {c.code for c in result.error_codes}
    assert "never called" in result.stage("S5").items[1].rationale


def test_breach_zeroes_everything_with_evidence(flawed):
    result, run_dir = flawed("breach")
    assert result.isolation.breached
    assert all(s.score == 0.0 for s in result.stages)
    assert result.aggregate.overall == 0.0 and result.aggregate.task == 0.0
    assert result.aggregate.rating == "F"
    ev = result.isolation.evidence
    assert ev and all(e.turn == ev[0].turn for e in ev)
    assert any("case_000" in e.path for e in ev), [e.path for e in ev]
    assert "private" in ev[0].command
    assert result.end_reason == "isolation_breach"
    assert any(e["type"] == "breach" for e in read_events(run_dir / "trajectory.jsonl"))
    # the judge never ran on a breached run
    assert result.judge is None


def test_noop_scores_near_zero(flawed):
    result, _ = flawed("noop")
    s = scores(result)
    assert s["S2"] == 0.0 and s["S3"] == 0.0 and s["S4"] == 0.0 and s["S5"] == 0.0
    # one rule in every track: no plan, so Lite's credited S1 items do not count either (was 0.0625)
    assert s["S1"] == 0.0 and result.aggregate.overall == 0.0 and result.aggregate.rating == "F"


def test_malformed_arguments_are_reported_back_and_run_continues(flawed):
    result, run_dir = flawed("malformed-args")
    events = read_events(run_dir / "trajectory.jsonl")
    bad = [e for e in events if e.get("error") == "malformed_arguments"]
    assert len(bad) == 1 and bad[0]["turn"] == 1
    assert result.aggregate.overall > 0.5


def test_trajectory_records_every_turn(run_agent):
    result, run_dir = run_agent("reference")
    events = read_events(run_dir / "trajectory.jsonl")
    kinds = [e["type"] for e in events]
    assert kinds[0] == "start" and kinds[-1] == "end"
    assistant = [e for e in events if e["type"] == "assistant"]
    assert len(assistant) == result.runtime.turns
    tools = [e for e in events if e["type"] == "tool" and e["name"] == "execute_code"]
    assert all("exit_code" in t and "code" in t and "duration_s" in t for t in tools)
    assert [t["cases_with_outputs"] for t in tools][-4:] == [1, 1, 5, 5]
    # compact: the whole trajectory of a demo run is small
    assert (run_dir / "trajectory.jsonl").stat().st_size < 200_000
    header = json.loads((run_dir / "result.json").read_text())["header"]
    assert set(header["hashes"]) >= {"brief", "task", "public_data", "private_data"}
