"""The run page of every demo, through the real runner: on a reference run (Standard: plan.png graded) and a
skip-validate run (Lite: S3 fails, Lite's items auto-pass), every stage item links to evidence on the page, a
failing S3 links to the turn where it failed (the batch that came without a pilot), and each case has its picture
(input, output, reference) drawn within the budget, only in the run folder.

Two runs per demo, each checked many ways, one test per demo; the runs come from the session's `amb_run` cache, shared
with the tracks' own tests in the same worker (`--dist loadfile` gives this file to one worker whole, but for
report_gen's and segmentation/demo's cases, which run with their tracks' groups: tests/file_order.py's SLOW_TESTS)."""

from __future__ import annotations

import json

import pytest
from automedbench.plugins import registry
from automedbench.testing import register_toy_track
from runpage_checks import check_run_page

register_toy_track()
REG = registry()
DEMOS = [*sorted(t for t in REG.tasks() if t.split("/", 1)[1].startswith("demo")), "toy/vowels"]
TEXT_ONLY = {"toy/vowels"}  # the toy's cases are words: texts, no image


def _tier(task: str, preferred: str) -> str:
    tiers = REG.task(task)[1].tiers
    return preferred if preferred in tiers else next(iter(tiers))


@pytest.mark.slow  # two whole runs per demo
@pytest.mark.parametrize("task", DEMOS)
def test_every_item_links_its_evidence_and_every_case_has_its_picture(task, amb_run):
    images = task not in TEXT_ONLY
    # the session's cached runs (`amb_run`): the track's own tests read the same runs (classification's Standard
    # reference run, ~25 CPU-s; detection's, enhancement-SR's, MR-CT's and VQA's skip-validate Lite runs, MR-CT's
    # Standard reference run) in the same worker: tests/file_order.py's GROUPS and SLOW_GROUPS; nothing here
    # writes to them
    result, run_dir = amb_run(task, "reference", tier=_tier(task, "standard"))
    assert result.state == "scored", result.error
    page = check_run_page(run_dir, images=images)
    text = (run_dir / "view.html").read_text()
    # plan.png, which S1 grades, is on the page (re-encoded), and S1's plan items link to it
    assert 'id="plan-png"' in text and "<img src=\"data:image/png" in text.split('id="plan-png"')[1][:400]
    graded_from_png = [i.id for s in result.stages for i in s.items if "plan/plan.png" in i.evidence_files]
    assert graded_from_png and all("#plan-png" in page.item_links[i] for i in graded_from_png)
    # the scripts the agent ran are kept, and every item citing one links to it
    kept = {p.relative_to(run_dir / "artefacts" / "scripts").as_posix()
            for p in (run_dir / "artefacts" / "scripts").rglob("*") if p.is_file()}
    for item in (i for s in result.stages for i in s.items):
        for path in (f for f in item.evidence_files if not f.startswith("plan/")):
            assert path in kept, (item.id, path, kept)
            assert f"#script-{sorted(kept).index(path)}" in page.item_links[item.id]
    # pictures live in the run folder only: never in the workspace or the frozen submission
    assert (run_dir / "pictures" / "index.json").is_file()
    assert not list((run_dir / "submission").rglob("case-*.png"))

    flawed, flawed_dir = amb_run(task, "skip-validate", tier="lite")
    assert flawed.state == "scored", flawed.error
    check_run_page(flawed_dir, images=images)
    s3 = next(s for s in flawed.stages if s.stage == "S3")
    events = [json.loads(line) for line in (flawed_dir / "trajectory.jsonl").read_text().splitlines()]
    batch = next(e["turn"] for e in events if e.get("type") == "tool" and e.get("cases_with_outputs", 0) > 1)
    failing = [i for i in s3.items if i.value is not None and i.value < 1.0]
    assert failing, "skip-validate should fail S3"
    flawed_page = (flawed_dir / "view.html").read_text()
    for item in failing:
        # where it failed: the batch turn (run without a passing pilot), linked
        assert batch in item.evidence_turns or item.evidence_cases, (item.id, item.rationale)
    assert f'href="#turn-{batch}"' in flawed_page


def test_demo_list_covers_every_track():
    """The list above is every installed track's demo (a new track's demo is checked without editing this file)."""
    tracks = {t.split("/", 1)[0] for t in DEMOS}
    assert {t for t in REG.tasks() if not t.startswith("toy/")} and tracks >= {
        t.split("/", 1)[0] for t in REG.tasks() if REG.task(t)[1].demo}
