"""Red team round 32: a leaderboard of chosen runs; through the real runner and CLI.

- **Best-of-N shown as single runs** (found by round 31): every genuine run copied into the folder a leaderboard
  reads counts, and sweep run ids repeat across sweeps, so a user could run a cell three times (or three sweeps)
  and copy only the best run of each: the board said "n 1" and nobody could tell. Signing cannot stop a user
  choosing, but it now makes choosing visible: each run signs in its header which attempt of its configuration
  (agent, task, tier, conditions digest) it was, drawn from a ledger in the harness state folder
  (`automedbench.attempts`), and a sweep's runs the sweep's id and planned size. `leaderboard` (terminal, `--json`,
  `--site`) says per row how many of the attempts made are in the folder and marks a row chosen when some are
  missing or a sweep is only partly present; `show` says which attempt a run was. Before: one of three runs copied
  gave a row with no trace of the other two; now "1 of 3 runs made", chosen. Editing the signed number breaks the
  proof: the run is not genuine and never counts.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from automedbench.testing import run_cli, run_task

TASK = "toy/vowels"


@pytest.fixture
def own_state(tmp_path, monkeypatch):
    """A state folder (key and attempt ledger) of this test alone: the session's is shared by every test's runs."""
    monkeypatch.setenv("AUTOMEDBENCH_STATE", str(tmp_path / "state"))


def _runs(tmp_path: Path, data_root: Path, n: int) -> list[Path]:
    out = tmp_path / "made"
    return [run_task(TASK, "batch-first", out=out, data_root=data_root)[1] for _ in range(n)]


def _board(folder: Path, tmp_path: Path, name: str) -> tuple[dict, str]:
    """`leaderboard FOLDER --json` through the CLI: its JSON and its terminal output."""
    path = tmp_path / f"{name}.json"
    done = run_cli("leaderboard", str(folder), "--json", str(path), "--resamples", "100")
    assert done.exit_code == 0, done.output
    return json.loads(path.read_text()), done.output


def _attempt(run_dir: Path) -> dict:
    return json.loads((run_dir / "result.json").read_text())["header"]["attempt"]


def test_the_best_of_three_runs_copied_alone_is_shown_as_chosen(own_state, data_root, tmp_path):
    made = _runs(tmp_path, data_root, 3)
    assert [_attempt(r)["number"] for r in made] == [1, 2, 3]
    assert len({_attempt(r)["config"] for r in made}) == 1
    best = max(made, key=lambda r: (json.loads((r / "result.json").read_text())["aggregate"]["overall"] or 0))
    board = tmp_path / "board"
    shutil.copytree(best, board / best.name)
    data, terminal = _board(board, tmp_path, "chosen")
    (row,) = data["rows"]
    assert row["n"] == 1
    assert (row["attempts_present"], row["attempts_made"], row["chosen"]) == (1, 3, True), row
    assert row["attempts"] == "1 of 3 runs made"
    assert "chosen runs" in terminal and "1 of 3 runs made" in terminal
    site = tmp_path / "site"
    assert run_cli("leaderboard", str(board), "--site", str(site), "--quiet", "--resamples", "100").exit_code == 0
    assert '<td class="chosen" title="chosen: 1 of 3 runs made">1 of 3 <b>chosen</b></td>' in (
        site / "index.html").read_text()
    shown = run_cli("show", str(board / best.name))
    assert shown.exit_code == 0, shown.output
    assert f"attempt {_attempt(best)['number']} of its configuration" in shown.output
    assert "3 made on this machine so far" in shown.output


def test_every_attempt_in_the_folder_is_not_marked(own_state, data_root, tmp_path):
    made = _runs(tmp_path, data_root, 3)
    data, terminal = _board(made[0].parent, tmp_path, "complete")
    (row,) = data["rows"]
    assert (row["n"], row["attempts_present"], row["attempts_made"], row["chosen"]) == (3, 3, 3, False), row
    assert "chosen runs" not in terminal
    site = tmp_path / "site"
    assert run_cli("leaderboard", str(made[0].parent), "--site", str(site), "--quiet",
                   "--resamples", "100").exit_code == 0
    assert "<b>chosen</b>" not in (site / "index.html").read_text()


def test_a_forged_attempt_number_makes_the_run_not_genuine(own_state, data_root, tmp_path):
    made = _runs(tmp_path, data_root, 2)
    board = tmp_path / "board"
    shutil.copytree(made[1], board / made[1].name)
    result = board / made[1].name / "result.json"
    raw = result.read_bytes()
    assert raw.count(b'"number": 2') == 1
    result.write_bytes(raw.replace(b'"number": 2', b'"number": 1'))  # "the first and only attempt"
    verify = run_cli("verify", str(board / made[1].name))
    assert verify.exit_code == 1 and "NOT GENUINE" in verify.output
    data, _ = _board(board, tmp_path, "forged")
    assert data["rows"] == [] and data["excluded"].get("not harness-written") == 1


def test_a_sweep_partly_copied_is_shown_as_chosen(own_state, data_root, tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOMEDBENCH_DATA", str(data_root))
    out = tmp_path / "sweep"
    done = run_cli("sweep", "--agents", "batch-first", "--tasks", TASK, "--repeats", "2", "--executor", "inline",
                   "--out", str(out))
    assert done.exit_code == 0, done.output
    runs = sorted(p.parent for p in out.glob("*/result.json"))
    assert len(runs) == 2
    sweep_id = json.loads((out / "sweep.json").read_text())["sweep_id"]
    assert {(_attempt(r)["sweep"], _attempt(r)["sweep_size"]) for r in runs} == {(sweep_id, 2)}
    whole, _ = _board(out, tmp_path, "whole")
    assert [(r["partial_sweeps"], r["chosen"]) for r in whole["rows"]] == [(0, False)]
    board = tmp_path / "board"
    shutil.copytree(runs[0], board / runs[0].name)
    part, terminal = _board(board, tmp_path, "part")
    (row,) = part["rows"]
    assert row["partial_sweeps"] == 1 and row["chosen"] is True, row
    assert "1 of 1 sweep(s) partly present" in terminal


def test_a_number_given_back_is_drawn_again_only_while_it_is_the_latest(own_state):
    """A run refused before its agent did anything leaves no folder and gives its number back (the runner's
    `attempts.release`), unless a later run drew after it: then the gap stays, said as an attempt made."""
    from automedbench import attempts

    first = attempts.draw("a", "t", "lite", "c")
    assert attempts.release(first) and attempts.draw("a", "t", "lite", "c")["number"] == first["number"] == 1
    second, third = attempts.draw("a", "t", "lite", "c"), attempts.draw("a", "t", "lite", "c")
    assert not attempts.release(second) and third["number"] == 3
    assert attempts.made_here() == (first["ledger"], {first["config"]: 3})
    assert attempts.draw("a", "t", "standard", "c")["number"] == 1  # another configuration counts apart


def test_an_attempt_the_harness_failed_is_taken_again_by_its_retry(own_state, reg, data_root, tmp_path):
    """An infrastructure failure is the harness's (never the agent's: rules of rounds 8-14, 29) and a sweep retries
    it, moving the failed record under `.attempts/`. Before: the retry drew the next number, so the sweep's own folder
    read "1 of 2 runs made", chosen, though nobody chose; now the failed attempt's number is taken again by the next
    run of its configuration (`attempts.void`), and the folder of that run alone is complete."""
    from automedbench import attempts
    from automedbench.api import ProviderUnavailable
    from automedbench.testing import StepsAgent, register_agent

    class LostByTheHarness(StepsAgent):
        name = "lost-by-the-harness"
        fail = True

        def next_turn(self, messages):
            if LostByTheHarness.fail:
                raise ProviderUnavailable("the provider never answered")  # not the agent's doing: retryable
            return super().next_turn(messages)

    register_agent(LostByTheHarness, reg)
    out = tmp_path / "made"
    lost, lost_dir = run_task(TASK, LostByTheHarness.name, out=out, data_root=data_root)
    assert lost.state == "infrastructure_failure", (lost.state, lost.error)
    first = _attempt(lost_dir)
    assert attempts.made_here()[1] == {first["config"]: 0}  # the lost attempt is not one made
    board = tmp_path / "board"
    shutil.move(lost_dir, tmp_path / "lost")  # as a sweep moves it under .attempts/
    LostByTheHarness.fail = False
    retry, retry_dir = run_task(TASK, LostByTheHarness.name, out=board, data_root=data_root)
    assert retry.state == "scored" and _attempt(retry_dir)["number"] == first["number"] == 1
    data, _ = _board(board, tmp_path, "retried")
    (row,) = data["rows"]
    assert (row["attempts_present"], row["attempts_made"], row["chosen"]) == (1, 1, False), row
    assert attempts.draw(LostByTheHarness.name, TASK, "lite", "c")["number"] == 1  # voids are per configuration
    _, third_dir = run_task(TASK, LostByTheHarness.name, out=board, data_root=data_root)
    assert _attempt(third_dir)["number"] == 2  # no void left: the next number
