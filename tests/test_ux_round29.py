"""A researcher's walk over release tasks, round 29 (detection/bccd, classification/skin-lesion, report_gen/iu-xray,
synthesis/msd-pancreas-ctsr staged from small fake downloads; runs replayed from the demos' trajectories, `evaluate
--baseline`, `show`, `view`, `leaderboard --site`). `run --agent reference` on a report generation release task
ended at "reports on the generated demo only" with no next step (every other track names `evaluate --submission`).
`show` re-rendered the grades and stopped: the case rows and pictures that decided Task and S4/S5 were on a page it
never named. A track's site page counted its tasks by conditions ("2 run(s) on 2 task(s)" for two runs of one
task), said nothing of the track itself or where its letters start, and listed its runs by agent (its best runs by
a search); a task's page said nothing of the data a release task needs. Eleven enhancement and synthesis task files
named their stage command inside `dataset`, so `automedbench tasks TASK` printed it twice."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from automedbench.plugins import registry
from automedbench.testing import run_cli
from browser import CHROMIUM, Browser


def test_the_report_gen_reference_on_a_release_task_names_the_next_step(tmp_path, monkeypatch):
    """One line, naming `evaluate --submission` and the model agents, as every other track's refusal does."""
    monkeypatch.setenv("AUTOMEDBENCH_DATA", str(tmp_path / "data"))
    result = run_cli("run", "--task", "report_gen/iu-xray", "--agent", "reference", "--out", str(tmp_path / "runs"))
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert "covers the generated demo only, not report_gen/iu-xray" in line, line
    assert "automedbench evaluate --task report_gen/iu-xray --submission DIR" in line, line
    assert "automedbench plugins" in line


def _release_tasks() -> list[tuple[str, object]]:
    return [(spec.id, spec) for _, spec in registry().tasks().values() if not spec.demo]


def test_no_task_names_its_stage_command_inside_its_dataset():
    """`tasks TASK` adds ", then: automedbench stage TASK --from PATH" after the dataset: said in `dataset` too, the
    line named the command twice."""
    doubled = [task_id for task_id, spec in _release_tasks() if "automedbench stage" in spec.dataset]
    assert not doubled, doubled


def test_tasks_names_the_stage_command_once(tmp_path):
    made = run_cli("tasks", "synthesis/msd-pancreas-ctsr", "--data-root", str(tmp_path / "data"))
    assert made.exit_code == 0, made.output
    text = " ".join(made.output.split())
    assert text.count("automedbench stage synthesis/msd-pancreas-ctsr --from PATH") == 1, text
    assert "MSD Task07_Pancreas" in text


def _run(out: Path, *extra: str) -> Path:
    before = {p.name for p in out.iterdir()} if out.exists() else set()
    made = run_cli("run", "--task", "toy/vowels", "--agent", "reference", "--out", str(out), *extra)
    assert made.exit_code == 0, made.output
    (name,) = {p.name for p in out.iterdir() if p.is_dir()} - before
    return out / name


@pytest.fixture
def two_runs(data_root, tmp_path, monkeypatch) -> Path:
    """Two runs of one task under two conditions (a turn budget changed): two rows of its Tasks table."""
    monkeypatch.setenv("AUTOMEDBENCH_DATA", str(data_root))
    out = tmp_path / "runs"
    _run(out)
    _run(out, "--max-turns", "40")
    return out


def test_show_ends_with_the_page_of_the_evidence(two_runs, tmp_path):
    """`show RUN` names the run page (each case's row and picture); a folder without one names `view`."""
    run_dir = sorted(p for p in two_runs.iterdir() if p.is_dir())[0]
    shown = run_cli("show", str(run_dir))
    assert shown.exit_code == 0, shown.output
    last = " ".join(shown.output.strip().splitlines()[-1].split())
    assert last.startswith(f"page: {run_dir / 'view.html'}"), last
    assert "each case's row and picture" in last
    (run_dir / "view.html").unlink()
    last = " ".join(run_cli("show", str(run_dir)).output.strip().splitlines()[-1].split())
    assert last.startswith(f"page: automedbench view {run_dir} writes it"), last


def test_a_track_page_counts_tasks_describes_the_track_and_names_its_best_run(two_runs, tmp_path):
    site = tmp_path / "site"
    made = run_cli("leaderboard", str(two_runs), "--site", str(site), "--quiet", "--resamples", "100")
    assert made.exit_code == 0, made.output
    (page,) = (site / "track").glob("toy*.html")
    html = page.read_text()
    assert "2 run(s) on 1 task(s)." in html, re.findall(r"\d+ run\(s\) on \d+ task\(s\)", html)
    assert "toy vowel-counting track" in html  # the track's own description, as `plugins` lists it
    assert re.search(r"toy/vowels</a>: [^<]*rated A at \d\.\d{3}, B at \d\.\d{3}", html), html[:3000]
    best = re.search(r'<h2 id="best">Best run per task</h2><ul class="best"><li>toy/vowels: <a href="\.\./runs/'
                     r'([^"]+)\.html">', html)
    assert best, html
    run_ids = {p.name for p in two_runs.iterdir() if p.is_dir()}
    assert best.group(1) in run_ids
    (task_page,) = (site / "task").glob("toy_vowels*.html")
    assert "Data: generated in code on its first run" in task_page.read_text()
    tracks = (site / "tracks.html").read_text()  # every installed track in a line, linked where it has runs
    assert re.search(r'<li><a href="track/toy[^"]*\.html">toy</a>: toy vowel-counting track[^<]*; 1 task\(s\)</li>',
                     tracks), tracks[-3000:]
    others = [name for name in registry().components["track"] if name != "toy"]
    for name in others:
        assert f"<li>{name}: " in tracks and "no runs here" in tracks, name


def test_a_release_task_page_says_what_its_data_takes():
    """A release task's page names its download and licence, the stage command and `tasks TASK` (budget, disk,
    network, sandbox needs) before anyone tries a run."""
    from automedbench_campaign.sitetrack import task_data

    _, spec = registry().task("detection/bccd")
    text = task_data(spec)
    assert "BCCD" in text and spec.license.split(";")[0] in text
    assert "<code>automedbench stage detection/bccd --from PATH</code>" in text
    assert "<code>automedbench tasks detection/bccd</code>" in text and "disk" in text and "network" in text


def test_show_of_an_evaluate_folder_says_no_agent_ran(data_root, tmp_path, monkeypatch):
    """`evaluate --out DIR` then `show DIR`: it said "attempt: not numbered (a run made before attempts were
    counted)", as if an old run; now that no agent ran, and where its page comes from."""
    monkeypatch.setenv("AUTOMEDBENCH_DATA", str(data_root))
    kept = tmp_path / "scored"
    made = run_cli("evaluate", "--task", "toy/vowels", "--baseline", "empty", "--out", str(kept))
    assert made.exit_code == 0, made.output
    lines = [" ".join(line.split()) for line in run_cli("show", str(kept)).output.strip().splitlines()]
    assert lines[-2] == "attempt: none (outputs scored by `automedbench evaluate`; no agent ran)", lines[-2:]
    assert lines[-1].startswith(f"page: automedbench view {kept} writes it"), lines[-1]


# Where each rubric item's evidence cell ends at a phone's width, and the page's width
EVIDENCE_RIGHT = """(() => ({width: document.documentElement.clientWidth,
  right: Math.max(...[...document.querySelectorAll('#stages + .scroll td.ev')]
    .map(td => td.getBoundingClientRect().right)),
  cells: document.querySelectorAll('#stages + .scroll td.ev').length}))()"""


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/test.sh installs it as root)")
def test_a_run_pages_evidence_links_are_on_a_phones_screen(two_runs, tmp_path):
    """At 390 px the stages table ran to ~615 px, its rationale and evidence columns (the links to the turns, files
    and cases behind each grade) behind a sideways scroll; now each item's rationale and evidence sit under it."""
    run_dir = sorted(p for p in two_runs.iterdir() if p.is_dir())[0]
    browser = Browser(tmp_path / "profile", width=390, height=900)
    try:
        facts = browser.load((run_dir / "view.html").as_uri())
        assert not facts["errors"], facts["errors"]
        seen = browser.call("Runtime.evaluate", {"expression": EVIDENCE_RIGHT, "returnByValue": True},
                            session=True)["result"]["value"]
    finally:
        browser.close()
    assert seen["cells"] >= 10, seen
    assert seen["right"] <= seen["width"], seen


def test_an_evaluate_folders_page_says_no_judge_graded_it(data_root, tmp_path, monkeypatch):
    """The page of an `evaluate --out` folder said "judge: version" with nothing after either word (ux29's note):
    no agent ran, so nothing was judged; it says so."""
    monkeypatch.setenv("AUTOMEDBENCH_DATA", str(data_root))
    kept = tmp_path / "scored"
    assert run_cli("evaluate", "--task", "toy/vowels", "--baseline", "empty", "--out", str(kept)).exit_code == 0
    viewed = run_cli("view", str(kept))
    assert viewed.exit_code == 0, viewed.output
    page = (kept / "view.html").read_text(encoding="utf-8")
    note = page[page.index('id="judge-note"'):].split("</p>")[0]
    assert "judge: none (no agent ran" in note and "version" not in note, note
