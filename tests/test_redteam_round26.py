"""Red team round 26: `judge-agreement` figures set by run folders the harness did not write as they are, through
the real runner and CLI. The adversary is a second user who can write the sweep folder (not the harness's key).

- **Agreement over runs never checked** (the gap round 24 left): `judge-agreement` read result.json, judge.json and
  the trajectory straight from each folder, so an edited verdict (every item set to what the other judge said) or a
  renamed copy of a run counted in the agreement and kappa a user publishes about two judges: pooled agreement
  0.28 over the two runs -> 0.67 over "3 runs" with one judge.json edited and a renamed copy (its verdict edited too)
  counted as a third run. Each run is now
  read and graded from a verified copy (`copy_verified`), a run not verified is left out and the header says how
  many and why ("1 left out, not verified as the harness's"), each with its reason on stderr.
- **One run in two folders** (left by round 26): a genuine run copied under its own name into another folder, or
  a copy kept from before it was re-graded, counted again: "over 4 run(s)" for two runs. A run (its id and signed
  trajectory) now counts once, at the first folder; the others are named on stderr and in --json `counted_once`.
- **Archived verdicts outside the proof**: after `rejudge`, the previous verdict is kept as judge.<name>.<stamp>.json,
  which the proof does not sign; `--stored-only` took it as that judge's verdict, edited or not. Only the signed
  judge.json counts as stored; an archived one is graded again now (or the run skipped under --stored-only).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from automedbench.api import ItemVerdict, Judge, JudgeVerdict, hookimpl
from automedbench.testing import run_cli, run_steps, run_task
from test_redteam_round13 import HALF

TASK = "toy/vowels"
ZERO = "zero-test-judge"


class ZeroJudge(Judge):
    """A judge that fails every item: the second judge the agreement is measured against."""

    name = ZERO

    def grade(self, judge_input: Any) -> JudgeVerdict:
        return JudgeVerdict(self.name, self.version,
                            [ItemVerdict(i.id, i.stage, i.description, 0.0, "fails") for i in judge_input.rubric])


@hookimpl
def automedbench_register_judges(register: Any) -> None:
    register(ZERO, ZeroJudge, "test judge: fails every item")


@pytest.fixture
def zero(reg):
    """This module as a plugin, for the zero judge, while a test runs."""
    name = "test_redteam_round26_zero_judge"
    reg.add_plugin(sys.modules[__name__], name=name)
    try:
        yield
    finally:
        reg.remove_plugin(name)


def _agreement(*args: str) -> tuple[Any, dict[str, Any]]:
    done = run_cli("judge-agreement", *args, "--judge-a", "rules", "--judge-b", ZERO, "--json")
    report = json.loads(done.stdout)
    assert done.exit_code == (0 if report["runs"] else 1), done.output  # nothing compared: exit 1 (polish5)
    return done, report


def _zeroed(path: Path) -> None:
    """Every item of a stored verdict set to 0.0: what the other judge says, so the judges 'agree'."""
    verdict = json.loads(path.read_text())
    for item in verdict["items"]:
        item["value"] = 0.0
    path.write_text(json.dumps(verdict))


def test_agreement_counts_only_runs_the_harness_wrote_as_signed(zero, data_root, tmp_path):
    """Before: the edited judge.json counted and the renamed copy was a 3rd run: pooled agreement 0.28 -> 0.67."""
    runs = tmp_path / "runs"
    _, good = run_task(TASK, "reference", out=runs, data_root=data_root)
    _, half = run_steps(TASK, [("python", HALF)], out=runs, data_root=data_root)
    _, honest = _agreement(str(runs))
    assert honest["runs"] == 2 and honest["pooled"]["agreement"] < 1.0, honest

    _zeroed(half / "judge.json")
    shutil.copytree(good, tmp_path / "forged" / "copy-of-a-run", ignore=shutil.ignore_patterns("workspace"))
    _zeroed(tmp_path / "forged" / "copy-of-a-run" / "judge.json")
    _, report = _agreement(str(runs), str(tmp_path / "forged"))
    assert report["runs"] == 1, report  # the untouched run only
    assert honest["left_out"] == []
    left = {Path(row["run"]).name: row["reason"] for row in report["left_out"]}
    assert set(left) == {half.name, "copy-of-a-run"}, left
    assert "judge.json changed since the harness signed the result" in left[half.name]
    good_only = _agreement(str(good))[1]
    assert report["pooled"] == good_only["pooled"]  # the figures are the genuine run's, untouched by the edits

    text = run_cli("judge-agreement", str(runs), "--judge-a", "rules", "--judge-b", ZERO)
    assert text.exit_code == 0, text.output
    assert "over 1 run(s); 1 left out, not verified as the harness's" in " ".join(text.stdout.split())
    assert f"left out {half}: not verified as the harness's: judge.json changed" in " ".join(text.stderr.split())


def test_an_archived_verdict_is_not_taken_as_stored(zero, data_root, tmp_path):
    """Before: after `rejudge --judge zero`, the archived rules verdict edited to all zeros gave agreement 0.0 -> 1.0,
    on a run `verify` calls genuine (the archive is outside the proof)."""
    runs = tmp_path / "runs"
    _, run_dir = run_task(TASK, "reference", out=runs, data_root=data_root)
    regraded = run_cli("rejudge", str(run_dir), "--judge", ZERO)
    assert regraded.exit_code == 0, regraded.output
    (archived,) = run_dir.glob("judge.rules.*.json")
    graded_now = _agreement(str(run_dir))[1]
    assert graded_now["runs"] == 1 and graded_now["pooled"]["agreement"] < 1.0
    _zeroed(archived)
    assert "NOT GENUINE" not in run_cli("verify", str(run_dir)).output
    assert _agreement(str(run_dir))[1]["pooled"] == graded_now["pooled"]  # the archive is not read
    _, report = _agreement(str(run_dir), "--stored-only")
    assert report["runs"] == 0 and report["skipped"] == [str(run_dir)], report


def test_one_run_in_two_folders_counts_once(zero, data_root, tmp_path):
    """Before: a genuine run copied to a second folder, and a copy kept from before the run was re-graded, each
    counted as another run: "over 3 run(s)" for one run, its items weighing three times in the figures."""
    runs = tmp_path / "runs"
    _, good = run_task(TASK, "reference", out=runs, data_root=data_root)
    run_steps(TASK, [("python", HALF)], out=runs, data_root=data_root)
    _, honest = _agreement(str(runs))
    kept, older = tmp_path / "kept", tmp_path / "older"  # each under the run's own name (renamed is not genuine)
    shutil.copytree(good, kept / good.name, ignore=shutil.ignore_patterns("workspace"))
    shutil.copytree(good, older / good.name, ignore=shutil.ignore_patterns("workspace"))
    regraded = run_cli("rejudge", str(older / good.name), "--judge", ZERO)  # another signed version of the run
    assert regraded.exit_code == 0, regraded.output
    for other in (kept, older):
        assert "NOT GENUINE" not in run_cli("verify", str(other / good.name)).output  # each alone is genuine
    _, report = _agreement(str(runs), str(kept), str(older))
    assert report["runs"] == 2, report
    assert report["left_out"] == []
    assert sorted(Path(row["run"]).parent.name for row in report["counted_once"]) == ["kept", "older"], report
    assert report["pooled"] == honest["pooled"]  # the same figures as the two runs alone

    text = run_cli("judge-agreement", str(runs), str(kept), str(older), "--judge-a", "rules", "--judge-b", ZERO)
    assert text.exit_code == 0, text.output
    assert "over 2 run(s); 2 counted once, another folder of a run already counted" in " ".join(text.stdout.split())
    assert "counted once" in text.stderr and "the same run as" in " ".join(text.stderr.split())
