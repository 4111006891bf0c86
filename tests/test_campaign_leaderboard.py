"""Leaderboard numbers against hand computation and scipy's bootstrap; outputs; the HTML in Chromium."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from automedbench.cli import main
from automedbench.records import Result
from automedbench.resultproof import write_result
from automedbench.runfolder import RunFolder
from automedbench.serialize import from_dict
from automedbench_campaign.htmlreport import render_html
from automedbench_campaign.leaderboard import build, to_json
from automedbench_campaign.render import to_csv
from automedbench_campaign.stats import bootstrap_means
from automedbench_campaign.store import load_table
from automedbench_campaign.synthetic import template, write_runs
from click.testing import CliRunner


def write(root: Path, name: str, agent: str, overall: float, stages: list[float], codes: list[str],
          state: str = "scored", task: str = "seg/a", tier: str = "lite", rating: str = "B", turns: int = 10,
          breached: bool = False) -> None:
    data = template(cases=2)
    data["header"].update(run_id=name, agent=agent, task=task, track=task.split("/")[0], tier=tier)
    data["state"] = state
    for stage, score in zip(data["stages"], stages, strict=True):
        stage["score"] = score
    data["aggregate"].update(overall=overall, agentic=overall, task=overall, rating=rating)
    data["runtime"].update(turns=turns, wall_s=100.0, tokens_in=1000, tokens_out=10, cost_usd=2.0)
    data["error_codes"] = [{"code": c, "message": "", "stage": "", "evidence_turns": [], "source": "t"} for c in codes]
    data["isolation"]["breached"] = breached
    (root / name).mkdir(parents=True)
    write_result(RunFolder(root / name), data)  # signed, as the harness writes its results


@pytest.fixture()
def small(tmp_path) -> Path:
    root = tmp_path / "runs"
    write(root, "r1", "A", 0.8, [1.0, 1.0, 0.5, 1.0, 1.0], [], rating="A")
    write(root, "r2", "A", 0.6, [1.0, 1.0, 0.0, 1.0, 0.5], ["E3"])
    write(root, "r3", "A", 0.2, [0.5, 1.0, 0.0, 0.5, 0.0], ["E3", "E5"], rating="F", turns=40)
    write(root, "r4", "B", 0.4, [0.5, 0.8, 0.2, 1.0, 0.5], ["E5"])
    write(root, "r5", "B", 0.0, [0.0] * 5, [], breached=True, rating="F")
    write(root, "r6", "B", 0.9, [1.0] * 5, [], state="infrastructure_failure")
    return root


def test_schema_of_synthetic_runs_is_the_real_one(tmp_path):
    (path,) = write_runs(tmp_path, 1)
    from_dict(json.loads((path / "result.json").read_text()), Result)  # raises on any schema drift


def test_cells_match_hand_computation(small):
    board = build(load_table([small]), resamples=500, seed=1)
    assert board.runs_total == 6 and board.runs_used == 5 and board.excluded == {"infrastructure_failure": 1}
    cells = {c.key["agent"]: c for c in board.cells}
    a = cells["A"]
    assert a.n == 3 and a.scores["overall"]["mean"] == pytest.approx((0.8 + 0.6 + 0.2) / 3, abs=1e-4)
    assert a.scores["S3"]["mean"] == pytest.approx(0.5 / 3, abs=1e-4)
    assert a.ratings == {"A": 1, "B": 1, "C": 0, "F": 1}
    assert a.turns == pytest.approx(20.0) and a.cost_usd == pytest.approx(2.0)
    assert a.with_code_share == pytest.approx(2 / 3)
    lo, hi = a.scores["overall"]["lo"], a.scores["overall"]["hi"]
    assert 0.2 <= lo <= a.scores["overall"]["mean"] <= hi <= 0.8


def test_analyses_match_hand_computation(small):
    a = build(load_table([small]), resamples=500).analyses
    stages = a["stages"]["all"]["stages"]
    assert stages["S3"]["mean"] == pytest.approx((0.5 + 0 + 0 + 0.2 + 0) / 5, abs=1e-4)
    assert a["stages"]["all"]["weakest"] == "S3" and a["stages"]["all"]["strongest"] == "S2"
    codes = a["codes"]
    assert codes["counts"] == {"E1": 0, "E2": 0, "E3": 2, "E4": 0, "E5": 2} and codes["fired_total"] == 4
    assert codes["shares"]["E3"] == 0.5 and codes["engineering_to_knowledge"] is None
    cliff = a["cliff"]  # the breached run is left out: it was never tagged
    assert cliff["0"]["n"] == 1 and cliff["0"]["mean"] == pytest.approx(0.8)
    assert cliff["1"]["mean"] == pytest.approx(0.5) and cliff["2+"]["mean"] == pytest.approx(0.2)
    assert cliff["drop_one_vs_none"] == pytest.approx(1 - 0.5 / 0.8, abs=1e-4)
    assert cliff["excluded_breached"] == 1
    rec = a["recovery"]["A"]
    assert rec["runs_2plus"] == 1 and rec["recovered"] == 1  # r3 submitted with Task 0.2 > 0
    assert a["turns_per_run"] == pytest.approx((10 + 10 + 40 + 10 + 10) / 5)


def test_bootstrap_agrees_with_scipy():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(7)
    values = rng.beta(2, 3, size=40)
    mean, lo, hi, n = bootstrap_means(values, resamples=4000, seed=3)
    ref = stats.bootstrap((values,), np.mean, n_resamples=4000, method="percentile", confidence_level=0.95,
                          random_state=11).confidence_interval
    assert mean[0] == pytest.approx(values.mean()) and n[0] == 40
    assert lo[0] == pytest.approx(ref.low, abs=0.01) and hi[0] == pytest.approx(ref.high, abs=0.01)


def test_bootstrap_is_seeded_and_ignores_nulls():
    values = np.array([[0.1, np.nan], [0.5, 1.0], [0.9, np.nan], [0.3, 0.0]])
    first = bootstrap_means(values, resamples=300, seed=5)
    again = bootstrap_means(values, resamples=300, seed=5)
    other = bootstrap_means(values, resamples=300, seed=6)
    assert all(np.array_equal(x, y, equal_nan=True) for x, y in zip(first, again, strict=True))
    assert not np.array_equal(first[1], other[1])
    assert first[0][1] == pytest.approx(0.5) and first[3].tolist() == [4, 2]
    empty = bootstrap_means(np.full((3, 1), np.nan), resamples=100)
    assert np.isnan(empty[0][0]) and empty[3][0] == 0


def test_more_runs_narrow_the_interval():
    rng = np.random.default_rng(0)
    widths = []
    for n in (10, 100, 1000):
        _, lo, hi, _ = bootstrap_means(rng.uniform(size=n), resamples=1000, seed=1)
        widths.append(hi[0] - lo[0])
    assert widths[0] > widths[1] > widths[2]


def test_synthetic_campaign_reproduces_the_paper_shape(tmp_path):
    write_runs(tmp_path, 1500, seed=3)
    a = build(load_table([tmp_path]), resamples=300).analyses
    assert a["stages"]["all"]["weakest"] == "S3" and a["stages"]["all"]["strongest"] == "S2"
    shares = a["codes"]["shares"]
    assert shares["E1"] < 0.02 and shares["E3"] > 0.25 and shares["E5"] > 0.25
    assert a["cliff"]["drop_one_vs_none"] > 0.1


def test_csv_and_json_outputs(small):
    board = build(load_table([small]), resamples=200)
    rows = list(csv.DictReader(io.StringIO(to_csv(board))))
    assert [r["agent"] for r in rows] == ["A", "B"]
    assert float(rows[0]["overall"]) == pytest.approx(0.5333, abs=1e-4)
    assert {"overall_lo", "S3_hi", "rating_F", "cost_usd", "tokens"} <= set(rows[0])
    data = json.loads(json.dumps(to_json(board)))
    assert data["analyses"]["codes"]["counts"]["E5"] == 2 and data["bootstrap"]["resamples"] == 200


def test_leaderboard_command(small, tmp_path):
    out = tmp_path / "report"
    result = CliRunner().invoke(main, ["leaderboard", str(small), "--by", "agent", "--csv", str(out / "b.csv"),
                                       "--json", str(out / "b.json"), "--html", str(out / "b.html")],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "weakest S3" in result.output and "1 infrastructure failure" in result.output
    assert (out / "b.csv").read_text().startswith("agent,n,")
    assert json.loads((out / "b.json").read_text())["by"] == ["agent"]
    assert '<table id="leaderboard">' in (out / "b.html").read_text()
    bad = CliRunner().invoke(main, ["leaderboard", str(small), "--by", "colour"])
    assert bad.exit_code == 2 and "choose keys" in bad.output
    empty = tmp_path / "empty"
    empty.mkdir()
    none = CliRunner().invoke(main, ["leaderboard", str(empty)])
    assert none.exit_code == 2 and "no run folders" in none.output


def test_a_torn_result_is_skipped_and_reported(small):
    (small / "torn").mkdir()
    (small / "torn" / "result.json").write_text('{"header": ')
    table = load_table([small])
    assert len(table) == 6 and len(table.skipped) == 1 and "torn" in table.skipped[0]


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/test.sh installs it as root)")
def test_html_report_renders_in_headless_chromium(tmp_path):
    from PIL import Image

    write_runs(tmp_path / "runs", 120, seed=2, agents=["opus", "gpt", "qwen"], tasks=["seg/a", "vqa/b"])
    table = load_table([tmp_path / "runs"])
    page = tmp_path / "report.html"
    page.write_text(render_html(build(table, resamples=200), table))
    url = page.resolve().as_uri()
    dom = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile-dom'}", "--dump-dom", url],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert '<table id="leaderboard">' in dom.stdout and dom.stdout.count("<svg") == 4
    assert "Weakest stage: S3 Validate" in dom.stdout
    shot = tmp_path / "shot.png"
    run = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile-shot'}",
                          "--window-size=1280,1600", f"--screenshot={shot}", url],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and shot.is_file(), run.stderr[-2000:]
    image = np.asarray(Image.open(shot).convert("RGB"))
    assert image.shape[:2] == (1600, 1280)
    colourful = (image.max(axis=2).astype(int) - image.min(axis=2)) > 60  # bars, not text or background
    assert colourful.mean() > 0.01 and (image < 250).mean() > 0.02


def test_a_folder_of_sweeps_is_searched_but_not_failed_attempts(tmp_path):
    write(tmp_path / "campaign1", "r1", "A", 0.5, [0.5] * 5, [])
    write(tmp_path / "campaign2" / "sub", "r2", "B", 0.7, [0.7] * 5, [])
    write(tmp_path / "campaign1" / ".attempts" / "r1", "01-infrastructure_failure", "A", 0.0, [0.0] * 5, [])
    table = load_table([tmp_path])
    assert sorted(table["run_id"]) == ["r1", "r2"]


def test_runs_of_tasks_with_a_public_labelled_source_can_be_set_apart(small):
    """A run whose header names the task's public labelled source (network on: the agent could fetch the
    answers) is counted by default, left out with --public-sources exclude, alone with only (issue 35)."""
    record = json.loads((small / "r1" / "result.json").read_text())
    record["header"]["public_source"] = "https://github.com/Shenggan/BCCD_Dataset"
    write_result(RunFolder(small / "r1"), record)  # signed again: the harness writes such a header itself
    table = load_table([small])
    assert list(np.asarray(table["run_id"])[table["public_source"]]) == ["r1"]
    runs = {}
    for choice in ("include", "exclude", "only"):
        out = small.parent / f"board-{choice}.json"
        result = CliRunner().invoke(main, ["leaderboard", str(small), "--by", "agent", "--quiet", "--json", str(out),
                                           "--public-sources", choice], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        runs[choice] = {row["agent"]: row["n"] for row in json.loads(out.read_text())["rows"]}
    assert runs["include"]["A"] == runs["exclude"]["A"] + 1 and runs["only"] == {"A": 1}
    assert "--public-sources" in CliRunner().invoke(main, ["leaderboard", "--help"]).output
