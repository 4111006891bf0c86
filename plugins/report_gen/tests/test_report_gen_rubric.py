"""The report rubric on the core's declared model: the original's 11/7/7 binary checks, Standard/Pro-only
items excluded at Lite, the rerun item applicable only after a failed pilot, graded by the rules judge
from the declaration (synthetic trajectories here; whole runs in test_report_gen_runs.py)."""

from __future__ import annotations

import pytest
from automedbench.api import asked_items, verdict_schema
from automedbench.testing import grade_by_rules, load_task, rubric_problems
from automedbench_report_gen.rubric import ITEMS, report_rubric

PLAN = """# Plan
Chosen model: pixel rules, inference entrypoint `python3 report_method.py DATA OUT [CASE]`.
One case is one study: every file in manifest image_files is used.
Output: outputs/<case_id>/report.txt. Pilot one study first; check FINDINGS present and views_used.
"""
RUN = "cd /ws && python3 report_method.py /data /ws/outputs"
CHECK = ("import json, pathlib\ntext = pathlib.Path('/ws/outputs/CXR0001/report.txt').read_text()\n"
         "m = json.load(open('/data/CXR0001/manifest.json'))\nviews_used = int(text.count('view'))\n"
         "assert views_used <= len(m['image_files'])\nprint(text)")


def call(turn: int, code: str, cases: int = 0, exit_code: int = 0, changed: list[str] | None = None) -> dict:
    return {"type": "tool", "name": "execute_code", "turn": turn, "call_id": f"c{turn}", "language": "bash"
            if code.startswith("cd ") else "python", "code": code, "stdout": "", "exit_code": exit_code,
            "cases_with_outputs": cases, "changed_cases": changed or []}


def judged(events: list[dict], pilot_checks: list[dict], tier: str = "lite"):
    graded = grade_by_rules("report_gen/demo", tier, events, plan=PLAN, extra={"pilot_checks": pilot_checks})
    return graded.resolved, graded.items, graded.stages


def test_declaration_is_the_originals_and_sound():
    rubric = report_rubric()
    assert rubric_problems(rubric, ["pilot_failed"]) == []
    per_stage = {s: [i for i in rubric.items if i.stage == s] for s in ("S1", "S2", "S3")}
    assert [len(v) for v in per_stage.values()] == [11, 7, 7]
    assert all(s.aggregation == "mean" for s in rubric.stages)  # the original: mean of applicable checks
    assert {i.id for i in rubric.items if i.at_tier("lite") == "auto-pass"} == {  # credited: the paper's rule
        "s1_plan_png", "s1_png_matches", "s1_compare"}
    assert [i.id for i in rubric.items if i.applies_if] == ["s3_rerun_after_fail"]
    assert len(ITEMS) == len(rubric.items) and all(i.hints.get("rule") for i in rubric.items)


def test_both_judges_read_the_declaration():
    by_rules = grade_by_rules("report_gen/demo", "lite", [], plan=PLAN)
    resolved = by_rules.resolved
    graded = [i.id for i in resolved.graded]
    assert "s1_compare" not in graded and "s3_rerun_after_fail" not in graded and "s1_case_is_study" in graded

    class Input:
        tier = "lite"
        rubric = resolved.graded

    assert [i.id for i in asked_items(Input())] == graded  # the LLM judge is asked exactly these
    assert set(verdict_schema(resolved.graded)["properties"]["items"]["required"]) == set(graded)
    assert list(by_rules.items) == graded and all(v.value is not None for v in by_rules.items.values())


def test_failed_pilot_then_rerun_passes_the_rerun_item():
    events = [call(3, f"{RUN} CXR0001", 1, exit_code=1, changed=["CXR0001"]),
              call(4, f"{RUN} CXR0001", 1, changed=["CXR0001"]), call(5, CHECK, 1), call(6, RUN, 12)]
    checks = [{"turn": 3, "call_id": "c3", "valid": False, "reasons": ["fewer than 40 characters"]},
              {"turn": 4, "call_id": "c4", "valid": True}]
    resolved, items, stages = judged(events, checks)
    assert resolved.states["s3_rerun_after_fail"] == "graded"
    assert items["s3_rerun_after_fail"].value == 1.0 and "turn 4" in items["s3_rerun_after_fail"].rationale
    s3 = {i.id: i.value for i in stages[2].items}
    assert s3 == {"s3_pilot_first": 1.0, "s3_same_pipeline": 1.0, "s3_pilot_output": 1.0, "s3_pilot_opened": 1.0,
                  "s3_checks_image_files": 1.0, "s3_all_images_used": 1.0, "s3_rerun_after_fail": 1.0}
    assert stages[2].score == 1.0


def test_failed_pilot_without_rerun_fails_the_rerun_item():
    events = [call(3, f"{RUN} CXR0001", 1, exit_code=1, changed=["CXR0001"]), call(4, CHECK, 1), call(5, RUN, 12)]
    checks = [{"turn": 3, "call_id": "c3", "valid": False, "reasons": ["fewer than 40 characters"]}]
    resolved, items, stages = judged(events, checks)
    assert resolved.states["s3_rerun_after_fail"] == "graded"
    assert items["s3_rerun_after_fail"].value == 0.0
    assert items["s3_pilot_first"].value == 0.0  # no pilot ever passed
    assert stages[2].score == 0.0


def test_clean_pilot_leaves_the_rerun_item_not_applicable():
    events = [call(3, f"{RUN} CXR0001", 1, changed=["CXR0001"]), call(4, "echo done", 1), call(5, RUN, 12)]
    resolved, items, stages = judged(events, [{"turn": 3, "call_id": "c3", "valid": True}])
    assert resolved.states["s3_rerun_after_fail"] == "not-applicable" and "s3_rerun_after_fail" not in items
    s3 = {i.id: (i.state, i.value) for i in stages[2].items}
    assert s3["s3_rerun_after_fail"] == ("not-applicable", None)
    # pilot first, same entrypoint, output written: 3 of the 6 applicable items (no check of the report)
    assert stages[2].score == pytest.approx(0.5)


def test_batch_at_once_fails_every_s3_item():
    events = [call(3, RUN, 12), call(4, CHECK, 12)]
    _, items, stages = judged(events, [])
    assert all(items[i].value == 0.0 for i in items if i.startswith("s3_")) and stages[2].score == 0.0
    assert "wrote several cases at once" in items["s3_pilot_first"].rationale


@pytest.mark.parametrize("task_id", ["report_gen/demo", "report_gen/mimic-cxr", "report_gen/iu-xray",
                                     "report_gen/chexpert-plus"])
def test_mlrg_offline_is_rated_on_its_own_bands(task_id):
    from automedbench.api import MetricBlock

    track, task = load_task(task_id)
    offline = track.rating_thresholds(task, MetricBlock("mlrg-offline", 0.7, 0.7))
    # B from 0.75: above the nearest-template baseline (0.64-0.69 on demo stagings), issue 22
    assert (offline.good, offline.okay) == (0.80, 0.75) and offline.min_valid == task.rating.min_valid
    real = track.rating_thresholds(task, MetricBlock("mlrg-7", 0.7, 0.7))
    assert (real.good, real.okay) == (0.80, 0.55) and real == task.rating  # the original's MLRG-7 bands


def test_pathcap_keeps_the_task_files_bands():
    from automedbench.api import MetricBlock

    track, task = load_task("report_gen/pathcap-100")
    assert track.rating_thresholds(task, MetricBlock("nlg-3", 0.5, 0.5)) == task.rating


def test_s2_needs_work_not_the_plan_that_names_it():
    plan = call(2, "import pathlib\nsteps = ['manifest.json', 'image_files']\npathlib.Path('/ws/plan/plan.md')"
                   ".write_text(str(steps))")
    _, items, _ = judged([plan], [])
    assert items["s2_reads_manifest"].value == 0.0 and items["s2_writes_report"].value == 0.0
    read = call(3, "import json\nm = json.load(open('/data/CXR0001/manifest.json'))\n"
                   "for f in m['image_files']:\n    print(f)")
    _, items, _ = judged([plan, read, call(4, f"{RUN} CXR0001", 1, changed=["CXR0001"])], [])
    assert items["s2_reads_manifest"].evidence_turns == [3] and items["s2_study_unit"].value == 1.0
    assert items["s2_writes_report"].evidence_turns == [4]
