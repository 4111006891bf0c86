"""Red team round 37: results anyone can put on a leaderboard, through the real runner and CLI. The adversary has no
harness key: a submitter mailing run folders, or another user who can add folders to the one a board reads.

- **An older signed version replayed** (ranking): a run re-graded (`rejudge` by a stricter judge) and a copy of it
  kept from before are two signed versions of one run; round 24 counts one, but the one found first in path order.
  The old version put under a folder that sorts first (`runs/0-kept/<run>`) was counted and the re-graded one
  refused as "another version": the board showed the grade the run no longer has. Every proof now signs when it was
  made (`at`) and the newest version of a run counts, wherever it sits; the older is named as such (Overall 1.0 ->
  0.625, the re-graded run's).
- **The HTML report hides choosing** (a displayed grade without its caveat): `leaderboard --html` had no "runs made"
  column, so one run copied out of three showed as a plain n 1 row while the terminal, --json and --site said "1 of
  3 runs made", chosen; nor did it say how many results it refused. It now has the column, the chosen rows in words
  and the results not counted.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from automedbench.testing import item_values, needs, run_cli, run_steps, run_task, stage_scores
from test_redteam_round26 import ZERO, zero  # noqa: F401  (the fixture registers the zero judge)
from test_redteam_round35 import judge_model  # noqa: F401  (the loopback judge that obeys injected text)
from test_result_proof import board

TASK = "toy/vowels"


@pytest.fixture
def own_state(tmp_path, monkeypatch):
    """A state folder (key and attempt ledger) of this test alone: the session's is shared by every test's runs."""
    monkeypatch.setenv("AUTOMEDBENCH_STATE", str(tmp_path / "state"))


def _overall(run_dir: Path) -> float:
    return json.loads((run_dir / "result.json").read_text())["aggregate"]["overall"]


def test_an_older_version_of_a_run_never_counts_over_its_newest(zero, data_root, tmp_path):  # noqa: F811
    """Before: the version kept from before the rejudge, under runs/0-kept/, counted (Overall 1.0) and the re-graded
    run was refused as its copy; now the re-graded one counts wherever either sits."""
    runs = tmp_path / "runs"
    _, run_dir = run_task(TASK, "reference", out=runs, data_root=data_root)
    kept = runs / "0-kept" / run_dir.name  # sorts before the run's own folder
    shutil.copytree(run_dir, kept, ignore=shutil.ignore_patterns("workspace"))
    regraded = run_cli("rejudge", str(run_dir), "--judge", ZERO)
    assert regraded.exit_code == 0, regraded.output
    old, new = _overall(kept), _overall(run_dir)
    assert new < old  # the strict judge fails every S1-S3 item
    for folder in (kept, run_dir):  # each alone is the harness's
        assert "NOT GENUINE" not in run_cli("verify", str(folder)).output
    data = board(runs)
    (row,) = data["rows"]
    assert row["n"] == 1 and row["overall"] == pytest.approx(new, abs=1e-3), (row, old, new)
    (line,) = data["rejected"]
    assert line.startswith(str(kept)) and "another version of the run at" in line and str(run_dir) in line
    assert "(older: signed" in line and "counted once, there, the newest" in line
    # the other way round (the kept copy where the run was, the re-graded one elsewhere) counts the same version
    other = tmp_path / "other"
    (other / "z").mkdir(parents=True)
    shutil.move(str(run_dir), str(other / "z" / run_dir.name))
    (row,) = board(runs, other)["rows"]
    assert row["overall"] == pytest.approx(new, abs=1e-3)


def test_the_html_report_says_a_row_is_chosen_and_what_it_refused(own_state, data_root, tmp_path):
    """Before: one run of three copied alone read as a plain n 1 row in --html, nothing about the other two, and a
    refused result was not mentioned; now "1 of 3" with CHOSEN and the chosen row said in words, and the refusal."""
    made = tmp_path / "made"
    runs = [run_task(TASK, "batch-first", out=made, data_root=data_root)[1] for _ in range(3)]
    board_dir = tmp_path / "board"
    shutil.copytree(runs[1], board_dir / runs[1].name, ignore=shutil.ignore_patterns("workspace"))
    forged = board_dir / "forged-run"
    shutil.copytree(runs[2], forged, ignore=shutil.ignore_patterns("workspace"))  # renamed: not genuine here
    page = tmp_path / "board.html"
    done = run_cli("leaderboard", str(board_dir), "--html", str(page), "--quiet", "--resamples", "100")
    assert done.exit_code == 0, done.output
    text = " ".join(re.sub(r"<[^>]+>", " ", page.read_text()).split())
    assert "Runs made" in text and "1 of 3 CHOSEN" in text, text[:3000]
    assert "1 of 3 runs made" in text and "only some of the attempts made" in text
    assert "Not counted: 1 not harness-written" in text
    assert "forged-run" in text and "signed it for the run folder" in text
    # every attempt present: no mark
    for extra in (runs[0], runs[2]):
        shutil.copytree(extra, board_dir / extra.name, ignore=shutil.ignore_patterns("workspace"))
    shutil.rmtree(forged)
    done = run_cli("leaderboard", str(board_dir), "--html", str(page), "--quiet", "--resamples", "100")
    assert done.exit_code == 0, done.output
    text = " ".join(re.sub(r"<[^>]+>", " ", page.read_text()).split())
    assert "3 of 3" in text and "CHOSEN" not in text and "Not counted" not in text


# ---------------------------------------------------------------- the all-ones pilot (left open by round 36)

SEG = "segmentation/demo"


def _seg_attack() -> list[tuple[str, str]]:
    """Round 36's forged-facts agent with its empty masks made all-ones: "positive" (Dice ~0.04 against the organ)."""
    from test_redteam_round35 import ZEROS
    from test_redteam_round36 import ATTACK, PILOT

    ones = PILOT.replace(ZEROS.format(n=1), ZEROS.format(n=1).replace("np.zeros", "np.ones"))
    assert ones != PILOT
    return [(kind, ones if code == PILOT else code) for kind, code in ATTACK]


@needs("openai")
def test_an_all_ones_pilot_is_no_positive_evidence(judge_model, data_root, tmp_path):  # noqa: F811
    """Before: S3 1.0 from the obeying judge (the ladder's top: the pilot "passed" with Dice 0.04), S5 1.0, rating C.
    Now the evaluator stores the constant baseline's Dice per case and positive evidence must beat it: S3 capped at
    the partial level, s5_positive_evidence 0, rating F (no case shows positive metric evidence)."""
    judge = judge_model("obey")
    result, _ = run_steps(SEG, _seg_attack(), out=tmp_path / "runs", data_root=data_root, tier="standard",
                          **judge.options())
    assert 0.0 < result.aggregate.task < 0.1  # the masks overlap the organ: Dice above 0, far below anything honest
    assert stage_scores(result)["S3"] == 0.5
    assert "shows positive metric evidence" in " ".join(
        i.rationale for s in result.stages if s.stage == "S3" for i in s.items)
    assert item_values(result)["s5_positive_evidence"] == 0.0
    assert result.aggregate.rating == "F", result.aggregate.rating_reason


def test_the_constant_baseline_shows_no_positive_evidence_and_the_reference_does(reg, tmp_path):
    """`evaluate --baseline constant` on the demo (every voxel foreground) through the CLI: before, every case counted
    as positive evidence (organ Dice > 0); now none does, while every case of the references themselves does."""
    track, task = reg.task(SEG)
    found, rows = {}, {}
    for name in ("constant", "perfect"):
        out = tmp_path / name
        done = run_cli("evaluate", "--task", SEG, "--baseline", name, "--out", str(out), "--no-pictures")
        assert done.exit_code in (0, 1), done.output
        rows[name] = json.loads((out / "evaluation.json").read_text())["metric"]["per_case"]
        found[name] = [track.positive_case(task, r) for r in rows[name]]
    assert found["constant"] and not any(found["constant"]) and all(found["perfect"]), found
    assert all(0.0 < r["organ_constant_dice"] < 0.1 for r in rows["perfect"]), rows  # the organ is ~2 % of a volume


def test_a_huge_evidence_file_is_refused_without_being_read(data_root, tmp_path):
    """Before: a genuine run's trajectory replaced by a sparse 3 GiB file was hashed whole by every reader (the
    leaderboard, verify, the site) before it was refused as changed: seconds a run, hours for a terabyte each. Now the
    sizes are summed first and the run is refused, unread, as holding more evidence than the harness writes."""
    runs = tmp_path / "runs"
    _, run_dir = run_task(TASK, "reference", out=runs, data_root=data_root)
    _, honest = run_task(TASK, "reference", out=runs, data_root=data_root)
    with open(run_dir / "trajectory.jsonl", "r+b") as handle:
        handle.truncate(3 << 30)  # sparse: no disk used
    data = board(runs)
    assert data["runs_used"] == 1, data
    (line,) = data["rejected"]
    assert line.startswith(str(run_dir)) and "more than 1024 MiB together" in line, line
    assert "more than 1024 MiB together" in " ".join(run_cli("verify", str(run_dir)).output.split())
    assert "NOT GENUINE" not in run_cli("verify", str(honest)).output
