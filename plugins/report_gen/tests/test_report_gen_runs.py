"""The report demo end to end through the real runner: the scripted reference, each flawed variant,
the baselines (via validate-task) and the report-specific error-code detectors."""

from __future__ import annotations

import copy
import re

import pytest
from automedbench.api import CodeContext
from automedbench.testing import (
    check_track,
    evaluate_outputs,
    item_values,
    stage_scores,
    stage_task,
    warm_evaluator_installed,
)
from automedbench_report_gen.codes import ReportDetector
from automedbench_report_gen.rubric import report_rubric

DEMO = "report_gen/demo"


@pytest.fixture(scope="module")
def reference(amb_run):
    return amb_run(DEMO, "reference")


@pytest.fixture(scope="module")
def flawed(amb_run):
    """A flawed variant's run, scored on the warm evaluator where the campaign built-in offers it, as every run
    of the test kit is by default: one METEOR JVM for the six runs instead of one each (the verdicts are the cold
    path's). With the default options, the cache key of the run page test's skip-validate run of this demo, which
    runs in this group's worker in the slow tier (tests/file_order.py's SLOW_TESTS): that run is made once."""
    return lambda agent: amb_run(DEMO, agent)


def test_demo_stages_studies_with_all_views(amb_data_root):
    staged = stage_task(DEMO, amb_data_root)
    assert len(staged.case_ids) == 12
    manifests = [(staged.public / c / "manifest.json").read_text() for c in staged.case_ids]
    assert sum('"images/02.png"' in m for m in manifests) == 5
    assert not list(staged.public.rglob("report.txt")) and not list(staged.public.rglob("facts.json"))
    assert (staged.public / "pilot_ids.txt").read_text().split()[0] in staged.case_ids


def test_reference_reports_from_pixels(reference):
    result, _ = reference
    assert result.state == "scored" and result.end_reason == "submitted"
    assert stage_scores(result) == {"S1": 1.0, "S2": 1.0, "S3": 1.0, "S4": 1.0, "S5": 1.0}
    metric = result.task
    assert metric.name == "mlrg-offline" and metric.used == "strict"
    comps = metric.components
    # the findings are read from the pixels: the rule labels agree (each staging draws a fresh secret seed, and
    # on some draws one faint finding of twelve studies is missed); only the wording differs
    assert comps["label_micro_f1_rule"] >= 0.95 and comps["entity_f1_rule"] > 0.95
    assert 0.80 <= metric.strict < 1.0 and result.aggregate.rating == "A"
    assert {"bleu_1", "bleu_4", "meteor", "rouge_l", "mlrg_per_case_mean"} <= set(comps)
    assert not [c for c in result.error_codes if c.code.startswith("E")]


# fast tier: the reference run is this tier's (cached), and the noop run takes under a second; in the slow tier this
# test was the only one to make the Lite reference run again (BENCHMARKS.md, "Test time, round 10")
def test_lite_run_credits_standard_only_items(reference, flawed):
    result, _ = reference
    stored = result.rubric  # the declaration used is stored, with the conditions it uses described
    assert stored.items == report_rubric().items and stored.stages == report_rubric().stages
    assert list(stored.conditions) == ["pilot_failed"] and "pilot" in stored.conditions["pilot_failed"]
    items = {i.id: i for s in result.stages if s.stage in ("S1", "S2", "S3") for i in s.items}
    assert len(items) == 25
    for credited in ("s1_plan_png", "s1_png_matches", "s1_compare"):  # the paper's Lite rule, as every track
        assert items[credited].state == "auto-pass" and items[credited].value == 1.0
    assert items["s3_rerun_after_fail"].state == "not-applicable" and items["s3_rerun_after_fail"].value is None
    s1 = next(s for s in result.stages if s.stage == "S1")
    assert s1.score == 1.0 and s1.rule == "mean of binary items"
    assert sum(i.state == "graded" for i in s1.items) == 8 and len(s1.items) == 11
    noop, _ = flawed("noop")  # no plan: nothing to credit, as in every track
    assert stage_scores(noop)["S1"] == 0.0 and noop.aggregate.overall == 0.0


@pytest.mark.slow  # a whole demo run of a flawed agent (the reference run is fast-tier)
def test_skip_validate_loses_s3(flawed):
    result, _ = flawed("skip-validate")
    s = stage_scores(result)
    assert s["S3"] == 0.0 and s["S4"] == 1.0 and s["S5"] == 1.0
    s3 = next(x for x in result.stages if x.stage == "S3").items
    assert [i.value for i in s3 if i.state == "graded"] == [0.0] * 6  # every applicable S3 check fails
    assert item_values(result)["s2_reads_manifest"] == 1.0  # the rest of the work is still seen


@pytest.mark.slow  # a whole demo run of a flawed agent (the reference run is fast-tier)
def test_wrong_format_reports_are_invalid(flawed):
    result, _ = flawed("wrong-format")
    assert result.task.strict == 0.0 and result.aggregate.rating == "F"
    bad = [c for c in result.cases if not c.valid]
    assert len(bad) == 12 and all("U+2022" in c.reasons[0] for c in bad)
    assert stage_scores(result)["S4"] == 0.5


@pytest.mark.slow  # a whole demo run of a flawed agent (the reference run is fast-tier)
def test_incomplete_is_strict_zero(flawed):
    result, _ = flawed("incomplete")
    # half the batch, plus the pilot study when the (secretly seeded) demo puts it in the other half
    assert sum(c.present for c in result.cases) in (6, 7)
    assert result.task.strict == 0.0 and 0 < result.task.partial < 1
    # S5: not every output valid; positive evidence unless the template cap holds (each missing study counts as the
    # blind template it stands for, so half missing plus a few near-identical normal reports reach it on some
    # stagings: the secret draw decides, and CI met one)
    from automedbench_report_gen.codes import templated

    assert stage_scores(result)["S5"] == (0.0 if templated(result.task.components) else 0.5)


@pytest.mark.slow  # a whole demo run of a flawed agent (the reference run is fast-tier)
def test_no_submit_and_breach(flawed):
    result, _ = flawed("no-submit")  # the paper's S5 has no submit factor: recorded, fires E5
    assert stage_scores(result)["S5"] == 1.0 and "E5" in [c.code for c in result.error_codes]
    result, _ = flawed("breach")
    assert result.isolation.breached and result.aggregate.rating == "F" and result.aggregate.overall == 0.0


def test_validate_task_and_baseline_order(amb_data_root):
    ok, text = check_track(DEMO, amb_data_root)
    assert ok, text
    strict = {name: float(value) for name, value in re.findall(r"baseline ([\w-]+) evaluates — strict ([\d.]+)", text)}
    assert "perfect baseline scores 1.0 / A" in text
    assert 1.0 > strict["reworded"] > strict["constant"]
    assert strict["nearest-template"] > strict["constant"]


def _with(result, rows=None, **components):
    changed = copy.deepcopy(result)
    if rows is not None:
        changed.task.per_case = rows
    changed.task.components.update(components)
    return CodeContext(changed, [])


def test_detectors(reference):
    result, _ = reference
    detector = ReportDetector()
    assert detector.detect(CodeContext(result, [])) == []
    rows = copy.deepcopy(result.task.per_case)
    for row in rows:
        row["missed_later_view"] = list(row.get("later_view_only", []))
    fired = detector.detect(_with(result, rows))
    assert [f.code for f in fired] == ["E1"] and "later view" in fired[0].message
    rows = [{**r, "impression_only": True} for r in result.task.per_case]
    assert [f.code for f in detector.detect(_with(result, rows))] == ["E5"]
    assert [f.code for f in detector.detect(_with(result, template_share=1.0))] == ["E3"]
    # the references repeating as much is the cohort, not a template
    assert detector.detect(_with(result, template_share=1.0, reference_template_share=0.9)) == []
    no_model = copy.deepcopy(result)
    next(i for s in no_model.stages for i in s.items if i.id == "s1_model").value = 0.0
    fired = detector.detect(CodeContext(no_model, []))
    assert [f.code for f in fired] == ["E1"] and "s1_model" in fired[0].message


def test_first_view_only_code_is_flagged(reference):
    result, _ = reference
    events = [{"type": "tool", "name": "execute_code", "exit_code": 0, "turn": 4,
               "code": "img = Image.open(case / m['image_files'][0])"}]
    fired = ReportDetector().detect(CodeContext(result, events))
    assert [f.code for f in fired] == ["E1"] and fired[0].evidence_turns == [4]


def test_one_template_with_a_word_added_per_study_is_still_one_template(tmp_path, amb_data_root):
    """The constant report, and the same with one different word per study, fire E3 and cannot rate B."""
    for name in ("majority-template", "template-plus-word"):
        # one warm evaluator for both where installed (one METEOR JVM, not two); its verdicts are the cold path's
        backend = "warm" if warm_evaluator_installed() else "process"
        result = evaluate_outputs(DEMO, baseline=name, data_root=amb_data_root, work=tmp_path / name,
                                  backend=backend)
        assert result.task.components["template_share"] == 1.0, name
        # E3 (one template); E1 may fire too (a template also misses the findings seen only on a later view)
        assert "E3" in [f.code for f in ReportDetector().detect(CodeContext(result, []))], name
        assert result.aggregate.rating not in ("A", "B"), (name, result.aggregate.rating_reason)
        assert next(i.value for s in result.stages for i in s.items if i.id == "s5_positive_evidence") == 0.0
