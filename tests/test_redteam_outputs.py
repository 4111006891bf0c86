"""Red-team round 6: the outputs people read (the campaign site, leaderboard files) over stored run folders.

Each test states what the attack or mix-up produced before the fix."""

from __future__ import annotations

import csv
import io
import json
import re
import signal
from pathlib import Path

import pytest
from automedbench.cli import main
from automedbench.resultproof import write_result
from automedbench.runfolder import RunFolder
from automedbench_campaign.synthetic import template
from click.testing import CliRunner


def write_run(root: Path, run_id: str, agent: str, overall: float, rating: str) -> Path:
    data = template(cases=2)
    data["header"].update(run_id=run_id, agent=agent, task="seg/a", track="seg", tier="lite")
    data["aggregate"].update(overall=overall, agentic=overall, task=overall, rating=rating)
    folder = root / run_id
    folder.mkdir(parents=True)
    write_result(RunFolder(folder), data)  # signed, as the harness writes its results
    return folder


def run_links(site: Path) -> dict[str, list[str]]:
    """Overall shown in each runs.html row -> the Overall its linked page shows."""
    page = (site / "runs.html").read_text()
    out: dict[str, list[str]] = {}
    for href, overall in re.findall(r'<a href="(runs/[^"]+)">.*?<td class="n">([0-9.]+)</td>', page):
        linked = (site / href).read_text()
        out.setdefault(overall, []).append(re.search(r"Overall <b>([0-9.]+)</b>", linked).group(1))
    return out


def test_every_site_row_links_to_its_own_run_page(tmp_path):
    """Two sweeps of the same grid (sweep run ids are the same tuple's hash, so they repeat across sweep
    folders), and run ids whose first 120 characters agree: before, the page names collided, the later run's
    page overwrote the earlier's and both rows of runs.html linked to it (a C run's row opened an A run's page).
    Now every row links to a page showing that row's run."""
    same = "agent.seg-a.lite.r000-abc123"
    long = "x" * 130
    write_run(tmp_path / "monday", same, "agent", 0.2, "C")
    write_run(tmp_path / "tuesday", same, "agent", 0.9, "A")
    write_run(tmp_path / "monday", long + "1", "other", 0.3, "C")
    write_run(tmp_path / "tuesday", long + "2", "other", 0.8, "A")
    site = tmp_path / "site"
    result = CliRunner().invoke(main, ["leaderboard", str(tmp_path / "monday"), str(tmp_path / "tuesday"),
                                       "--site", str(site), "--quiet", "--resamples", "100"])
    assert result.exit_code == 0, result.output
    links = run_links(site)
    assert len(links) == 4, links
    for overall, shown in links.items():
        assert shown == [overall], (overall, shown)


def test_each_agent_link_of_the_ranking_lands_on_its_own_rows(tmp_path):
    """Agents whose names differ only in characters an anchor cannot hold ("lab.v2" and "lab_v2"): before, both
    ranking rows linked `runs.html#agent-lab_v2`, the first agent's rows. Now each link names its own agent's
    first row."""
    write_run(tmp_path / "runs", "r1", "lab.v2", 0.2, "C")
    write_run(tmp_path / "runs", "r2", "lab_v2", 0.9, "A")
    site = tmp_path / "site"
    result = CliRunner().invoke(main, ["leaderboard", str(tmp_path / "runs"), "--site", str(site), "--quiet",
                                       "--resamples", "100"])
    assert result.exit_code == 0, result.output
    ranking = (site / "index.html").read_text()
    runs = (site / "runs.html").read_text()
    for agent in ("lab.v2", "lab_v2"):
        anchor = re.search(rf'href="runs.html#([^"]+)">{re.escape(agent)}</a>', ranking).group(1)
        row = re.search(rf'<tr id="{re.escape(anchor)}">.*?</tr>', runs).group(0)
        assert f"<td>{agent}</td>" in row, (agent, row)


def test_a_run_named_by_two_overlapping_roots_counts_once(tmp_path):
    """`leaderboard runs runs/<id>` (or one folder spelled twice): before, the run was loaded once per root and
    weighed double in its cell (here 5 runs were loaded for 2 and the mean moved from 0.5 to 0.58). Now each
    run counts once."""
    runs = tmp_path / "runs"
    write_run(runs, "r1", "agent", 0.9, "A")
    write_run(runs, "r2", "agent", 0.1, "F")
    out = tmp_path / "board.json"
    result = CliRunner().invoke(main, ["leaderboard", str(runs), str(runs / "r1"), str(tmp_path / "." / "runs"),
                                       "--by", "agent", "--json", str(out), "--quiet", "--resamples", "100"])
    assert result.exit_code == 0, result.output
    board = json.loads(out.read_text())
    assert board["runs_total"] == 2
    assert board["rows"][0]["n"] == 2 and abs(board["rows"][0]["overall"] - 0.5) < 1e-9


BIDI = "\u202e\u2066\u200f\u061c"


@pytest.mark.slow  # one toy run through the real runner (a few seconds under load)
def test_bidi_controls_in_agent_text_do_not_reorder_the_run_page(tmp_path):
    """An agent's file names and output carrying bidi controls (U+202E RIGHT-TO-LEFT OVERRIDE, isolates, marks):
    before, they reached the run page raw, so what followed a file name on its line (its size, the rejection
    reason) displayed reordered. The terminal already showed them as escapes; the page now does too."""
    from automedbench.testing import StepsAgent, register_agent, register_toy_track, run_task

    register_toy_track()
    register_agent(StepsAgent)
    code = ("import os, pathlib\nws = pathlib.Path(os.environ['WORKSPACE_DIR']) / 'outputs'\n"
            "for case in sorted(os.listdir(os.environ['DATA_DIR'])):\n"
            "    (ws / case).mkdir(parents=True, exist_ok=True)\n"
            f"    (ws / case / {('gpj.' + BIDI + 'x')!r}).write_text('1')\n"
            f"print({('done ' + BIDI + ' reversed') !r})\n")
    _, run_dir = run_task("toy/vowels", StepsAgent.name, out=tmp_path / "runs", data_root=tmp_path / "data",
                          agent_options={"steps": [["python", code]]})
    result = CliRunner().invoke(main, ["view", str(run_dir)])
    assert result.exit_code == 0, result.output
    page = (run_dir / "view.html").read_text()
    assert "gpj." in page and "reversed" in page  # the file name and the output are on the page
    assert not any(char in page for char in BIDI), [hex(ord(c)) for c in BIDI if c in page]


@pytest.mark.parametrize("name", ["SIGKILL", "SIGXCPU", "SIGXFSZ", "SIGSEGV", "SIGABRT", "SIGBUS"])
def test_an_evaluator_killed_by_a_limit_signal_is_the_submissions_failure(name):
    """An evaluator child that dies of a limit's signal failed on the submission (agent_failure, Task 0), never a
    retryable harness failure: the kernel's limits, and native code failing to allocate under the address-space
    limit (a C++ library's uncaught allocation failure aborts: SIGABRT, before only SIGSEGV counted)."""
    from automedbench.engine import submission_failure

    reason = submission_failure(getattr(signal, name), [])
    assert reason is not None and "limit on this submission" in reason
    assert submission_failure(signal.SIGTERM, []) is None  # stopped from outside: not the submission's doing


# A scorer bug one answer triggers (the evaluator process dies on it), as tests/test_warm_evaluator.py stands in
# for one: a trusted plugin the evaluator imports by module name.
FAULTY_SCORER = '''
import os, signal
from automedbench.toy import track

_score = track.VowelEvaluation.score_case

def score_case(self, case_id, submitted):
    if (submitted / "answer.txt").read_text().strip() == "99":
        os.kill(os.getpid(), signal.SIGSEGV)
    return _score(self, case_id, submitted)

track.VowelEvaluation.score_case = score_case
'''


@pytest.fixture
def faulty_scorer(tmp_path, monkeypatch):
    import sys

    from automedbench.plugins import registry
    from automedbench.testing import register_toy_track
    from automedbench.toy import track

    register_toy_track()
    (tmp_path / "amb_redteam6_faulty.py").write_text(FAULTY_SCORER)
    monkeypatch.syspath_prepend(str(tmp_path))
    original = track.VowelEvaluation.score_case
    import amb_redteam6_faulty

    reg = registry()
    reg.add_plugin(amb_redteam6_faulty, name="amb-redteam6-faulty")
    yield reg
    reg.pm.unregister(name="amb-redteam6-faulty")
    reg.added_modules.pop("amb-redteam6-faulty", None)
    reg._origin.pop("amb-redteam6-faulty", None)
    track.VowelEvaluation.score_case = original
    sys.modules.pop("amb_redteam6_faulty", None)


@pytest.mark.slow  # a toy run through the real runner and its evaluator process
def test_a_submission_that_breaks_the_evaluator_scores_zero_and_counts(faulty_scorer, tmp_path):
    """A weak run whose submission makes the evaluator fail (here a scorer crash on one answer; in the field the
    evaluator's time or memory limit): before, the run was `agent_failure` with no Task, no judge verdict and so
    no Overall, and the leaderboard's means leave nulls out, so the weak run vanished from its agent's Task and
    Overall (here the agent's cell had no Task and no Overall at all). Now it is still `agent_failure` (H-EVAL),
    with Task 0, the judge's stages and an Overall, and it counts."""
    from automedbench.testing import StepsAgent, register_agent, run_task

    register_agent(StepsAgent, faulty_scorer)
    write = ("import os, pathlib\nws = pathlib.Path(os.environ['WORKSPACE_DIR']) / 'outputs'\n"
             "for case in sorted(os.listdir(os.environ['DATA_DIR'])):\n"
             "    (ws / case).mkdir(parents=True, exist_ok=True)\n"
             "    (ws / case / 'answer.txt').write_text({answer!r})\n")
    runs = tmp_path / "runs"
    broken, broken_dir = run_task("toy/vowels", StepsAgent.name, out=runs, data_root=tmp_path / "data",
                                  agent_options={"steps": [["python", write.format(answer="99")]]})
    assert (broken.state, broken.end_reason) == ("agent_failure", "agent_error"), broken.error
    assert "H-EVAL" in {c.code for c in broken.error_codes}
    assert broken.task is not None and broken.task.strict == 0.0 and broken.aggregate.task == 0.0
    assert broken.aggregate.overall is not None and broken.aggregate.rating == "F"
    assert (broken_dir / "evaluation.json").is_file()  # what rejudge and the run page read
    out = tmp_path / "board.json"
    result = CliRunner().invoke(main, ["leaderboard", str(runs), "--by", "agent", "--json", str(out), "--quiet",
                                       "--resamples", "100"])
    assert result.exit_code == 0, result.output
    row = json.loads(out.read_text())["rows"][0]
    assert row["n"] == 1 and row["task"] == 0.0 and row["overall"] == broken.aggregate.overall


def test_runs_without_an_overall_are_counted_and_said(tmp_path):
    """A run whose judge gave no verdict (an LLM judge that never answered validly, which agent text may try to
    cause) has no Overall, and the means leave it out: before, the cell still said n=2 and nothing told the
    reader its Overall (0.9 here) came from one run of the two. Now the CSV/JSON give each metric's count
    (`overall_n`) and the terminal says how many runs have no Overall."""
    runs = tmp_path / "runs"
    write_run(runs, "good", "agent", 0.9, "A")
    folder = write_run(runs, "unjudged", "agent", 0.0, "F")
    data = json.loads((folder / "result.json").read_text())
    data["aggregate"].update(overall=None, agentic=None, task=0.1)
    write_result(RunFolder(folder), data)
    out = tmp_path / "board.csv"
    result = CliRunner().invoke(main, ["leaderboard", str(runs), "--by", "agent", "--csv", str(out),
                                       "--resamples", "100"])
    assert result.exit_code == 0, result.output
    row = next(csv.DictReader(io.StringIO(out.read_text())))
    assert (row["n"], row["overall_n"], row["task_n"]) == ("2", "1", "2")
    assert "1 counted run(s) have no Overall" in " ".join(result.output.split())
