"""A researcher comparing agents, round 26: a sweep of the reference, a trivial, a crashing and a timed-out agent over
three tracks' demos, then the leaderboard, its site and each run's page. A `sweep --workers 2` drew no image of any
image task (every input refused as "a hard link": the worker slots hard-link the staged data); a task's page on the
site showed no picture of the task; a crashed CLI agent ended "scored (agent_stopped)" with no next step; a sweep
printed a run cut off by its budget as a plain F and said nothing of what it would take before it began; a
conditions digest was never said in words; at 390 px the run page's links ran off the screen, and at 1280 px the
ranking's last column hid behind a scroll bar."""

from __future__ import annotations

import json
import re

import pytest
import test_cli_newuser
from browser import CHROMIUM, Browser

cli = test_cli_newuser.cli  # the new user's command line (CliRunner, errors as a pipe sees them), shared
TOY = ("run", "--task", "toy/vowels", "--agent", "reference")


def test_a_parallel_sweep_draws_the_pictures_of_an_image_task(cli, tmp_path):
    """Each worker of `sweep --workers 2` reads its own data root, whose public files are hard links to the staged
    ones; every picture read the input through the download checks, which refuse a file with two names, so each
    VQA case's page said "no picture: UserError: ...image.png: a hard link (3 names for one file ...)"."""
    out = tmp_path / "sweep"
    swept = cli("sweep", "--agents", "reference,noop", "--tasks", "vqa/demo", "--workers", "2", "--out", out)
    assert swept.exit_code == 0, swept.output
    (run,) = out.glob("reference.vqa-demo.*")
    index = json.loads((run / "pictures" / "index.json").read_text())
    cases = index["cases"]
    assert cases and all(c["file"] for c in cases), [c.get("note") for c in cases]
    assert not any("hard link" in (c.get("note") or "") for c in cases)
    page = tmp_path / "page.html"
    assert cli("view", run, "--out", page).exit_code == 0
    text = page.read_text()
    assert "hard link" not in text
    assert len(re.findall(r'<img src="data:image/png;base64,[^"]+" alt="case ', text)) == len(cases)


def test_a_tasks_page_shows_a_case_of_its_best_run(cli, tmp_path):
    """The task page (`leaderboard --site`) said what the task measures and gave scores, a chart and commands, but
    no picture of an input, an output or a reference: they were on each run's page, for a reader who opened one."""
    out, made = tmp_path / "runs", tmp_path / "site"
    assert cli(*TOY, "--out", out, "--quiet").exit_code == 0
    assert cli("run", "--task", "toy/vowels", "--agent", "noop", "--out", out, "--quiet").exit_code == 0
    built = cli("leaderboard", out, "--site", made, "--quiet", "--resamples", "100")
    assert built.exit_code == 0, built.output
    (page,) = (made / "task").iterdir()
    text = page.read_text()
    assert '<h2 id="picture">What it looks like</h2>' in text, text[:3000]
    best = next(p for p in out.iterdir() if json.loads((p / "result.json").read_text())["header"]["agent"]
                == "reference")
    figure = text.split('<h2 id="picture">', 1)[1].split("</figure>", 1)[0]
    assert f'of run <a href="../runs/{best.name}.html#pictures">{best.name}</a> (reference, lite, Overall 1.000)' \
        in figure, figure
    first = json.loads((best / "pictures" / "index.json").read_text())["cases"][0]
    word, answer, count = (t["text"] for t in first["texts"])  # the toy's case is text: word, answer, vowels
    assert f">{word}<" in figure and f">{answer}<" in figure and f">{count}<" in figure, figure


def test_a_tasks_page_without_a_picture_says_why(cli, tmp_path):
    """With no picture to show, the page says why (the site built with --no-pictures, or runs that kept none)."""
    out = tmp_path / "runs"
    assert cli(*TOY, "--out", out, "--quiet", "--no-pictures").exit_code == 0
    for extra, why in (((), "none of these runs kept one"), (("--no-pictures",), "built with --no-pictures")):
        made = tmp_path / f"site{len(extra)}"
        assert cli("leaderboard", out, "--site", made, "--quiet", "--resamples", "100", *extra).exit_code == 0
        (page,) = (made / "task").iterdir()
        section = page.read_text().split('<h2 id="picture">What it looks like</h2>', 1)[1][:600]
        assert section.startswith('<p class="note">No picture: ') and why in section, section


def test_an_agent_that_stopped_without_submitting_says_where_to_read_why(cli, tmp_path):
    """An installed CLI agent whose program crashed (exit 3, its traceback on stderr) ended "scored
    (agent_stopped)", rating F, with no error and no next step in `run`, `show` or on its page."""
    spec = tmp_path / "crash.yaml"
    spec.write_text("name: crasher\ncommand: \"echo 'Traceback: boom' >&2; exit 3\"\n")
    out = tmp_path / "runs"
    ran = cli("run", "--task", "toy/vowels", "--agent", "cli", "--agent-option", f"spec={spec}", "--out", out)
    assert ran.exit_code == 0, ran.output
    (run_dir,) = out.iterdir()
    assert json.loads((run_dir / "result.json").read_text())["end_reason"] == "agent_stopped"
    shown = cli("show", run_dir)
    step = ("the agent ended the run itself, without calling submit_results, and was scored on what it had written: "
            "its last reply and its last call's output say why (the run page's Trajectory, or trajectory.jsonl in "
            "the run folder); an installed CLI agent stops so when its program exits non-zero")
    for output in (ran.output, shown.output):
        assert "next: " + step in " ".join(output.split()), output
    page = (run_dir / "view.html").read_text()
    assert "<dt>next</dt><dd>" + step.replace("'", "&#x27;") + "</dd>" in page
    assert "Traceback: boom" in page  # where it points: the call's stderr, on the same page


def test_a_sweep_names_the_runs_that_stopped_short(cli, tmp_path):
    """`sweep` printed a run cut off by its turn budget as "scored  Overall 0.170  F", as it printed an agent that
    submitted and scored F: a researcher comparing agents could not tell a budget from a bad method."""
    out = tmp_path / "sweep"
    swept = cli("sweep", "--agents", "reference", "--tasks", "toy/vowels", "--max-turns", "2", "--out", out)
    assert swept.exit_code == 0, swept.output
    (line,) = [t for t in swept.stderr.splitlines() if t.startswith("[1/1] ")]
    assert "  scored (turn_limit)  Overall " in line, line
    assert ("not submitted, scored as they stood: 1 turn_limit; `automedbench show RUN` says why and what next for "
            "each") in " ".join(swept.output.split()), swept.output
    fine = cli("sweep", "--agents", "reference", "--tasks", "toy/vowels", "--out", tmp_path / "fine")
    assert fine.exit_code == 0 and "not submitted" not in fine.output and "(submitted)" not in fine.output


def test_a_conditions_digest_is_said_in_words(cli, tmp_path):
    """Runs of one agent under other options are rows apart, each named by a 12-digit digest: the terminal, --json
    and the site showed "069f7370a2f9" and "e31120c0dc80" with no word of which had `--time-limit 3`."""
    out = tmp_path / "runs"
    assert cli(*TOY, "--out", out, "--quiet").exit_code == 0
    assert cli(*TOY, "--max-turns", "30", "--out", out, "--quiet").exit_code == 0
    digest = {}
    for run in out.iterdir():
        result = json.loads((run / "result.json").read_text())
        key = "longer" if "max_turns" in result["header"]["options"] else "plain"
        digest[key] = result["header"]["hashes"]["conditions"][:12]
    said = f"{digest['plain']} the defaults; {digest['longer']} --max-turns 30"
    board = cli("leaderboard", out, "--resamples", "100", "--json", tmp_path / "board.json", "--site",
                tmp_path / "site")
    assert board.exit_code == 0, board.output
    assert f"Conditions (rows of other options are never pooled): {said}" in " ".join(board.output.split())
    assert json.loads((tmp_path / "board.json").read_text())["conditions"] == {
        digest["plain"]: "the defaults", digest["longer"]: "--max-turns 30"}
    assert f'<p class="note">Conditions (rows of other options are never pooled): {said}</p>' in \
        (tmp_path / "site" / "index.html").read_text()


def test_a_sweep_says_what_it_will_take_before_it_starts(cli, tmp_path):
    """`run` says its budget, disk and sandbox before any work; a sweep said nothing until its first result, so two
    workers' workspaces (each reserved before its agent starts) were taken unannounced."""
    from automedbench.plugins import registry

    spec = registry().track("toy").task("toy/vowels")
    swept = cli("sweep", "--agents", "reference,noop", "--tasks", "toy/vowels", "--workers", "2", "--out",
                tmp_path / "sweep")
    assert swept.exit_code == 0, swept.output
    first, second = swept.stderr.splitlines()[:2]
    assert first == (f"sweep plan: 2 run(s) over 1 task(s), 2 at a time; each run's workspace reserves up to "
                     f"{spec.workspace_mb} MB before its agent starts ({2 * spec.workspace_mb} MB at once); budget "
                     f"up to {spec.time_limit_s:g} s per run; sandbox local; each task's data is checked as staged "
                     "(a demo's is generated) first"), first
    assert second == "2 run(s): 0 already finished, 2 to run"
    unstaged = cli("sweep", "--agents", "noop", "--tasks", "segmentation/kidney", "--out", tmp_path / "real")
    assert unstaged.exit_code == 2 and len(unstaged.stderr.splitlines()) == 1, unstaged.stderr  # refused, one line
    assert "is not staged" in unstaged.stderr


NAV_RIGHT = "Math.max(...[...document.querySelectorAll('nav a')].map(a => a.getBoundingClientRect().right))"
FIGURE_RIGHT = ("Math.max(0, ...[...document.querySelectorAll('figure, figure *')]"
                ".map(e => e.getBoundingClientRect().right))")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/test.sh installs it as root)")
def test_on_a_phone_the_run_pages_links_and_the_tasks_picture_stay_on_the_screen(cli, tmp_path):
    """At 390 px the run page's links ran off the screen ("trajectory" cut at the right edge): they were written
    with no space between them, so the line could not wrap. The task page's new picture is checked there too."""
    out = tmp_path / "runs"
    assert cli(*TOY, "--out", out, "--quiet").exit_code == 0
    assert cli("leaderboard", out, "--site", tmp_path / "site", "--quiet", "--resamples", "100").exit_code == 0
    (run_dir,) = out.iterdir()
    (task_page,) = (tmp_path / "site" / "task").iterdir()
    browser = Browser(tmp_path / "profile", width=390)
    try:
        seen = {}
        for name, page, expression in (("run page", run_dir / "view.html", NAV_RIGHT),
                                       ("site run page", tmp_path / "site" / "runs" / f"{run_dir.name}.html",
                                        NAV_RIGHT),
                                       ("task page", task_page, FIGURE_RIGHT)):
            facts = browser.load(page.as_uri())
            assert not facts["errors"], facts["errors"]
            seen[name] = browser.call("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                                      session=True)["result"]["value"]
    finally:
        browser.close()
    assert all(0 < right <= 390 for right in seen.values()), seen


SCROLLED = "[...document.querySelectorAll('.scroll')].map(e => e.scrollWidth - e.clientWidth)"


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/test.sh installs it as root)")
def test_the_ranking_with_conditions_and_intervals_fits_a_1280_px_laptop(cli, tmp_path):
    """With runs of other conditions (a conditions column) and repeats (a CI under each mean), the ranking was 1200 px
    wide in a 1168 px box at 1280 px: its last column, "runs made", was cut off behind a scroll bar. Its cost chart
    of runs that called no model put every point on $0 of a dollar axis, with no word of why."""
    out = tmp_path / "runs"
    swept = cli("sweep", "--agents", "reference,skip-validate", "--tasks", "toy/vowels", "--repeats", "2",
                "--out", out)
    assert swept.exit_code == 0, swept.output
    assert cli(*TOY, "--max-turns", "30", "--out", out, "--quiet").exit_code == 0
    assert cli("leaderboard", out, "--site", tmp_path / "site", "--quiet", "--resamples", "100").exit_code == 0
    index = (tmp_path / "site" / "index.html").read_text()
    assert "<th>conditions</th>" in index and 'class="ci muted"' in index  # the wide case
    # the cost chart of runs that called no model: an axis of dollars with every point at 0, now said in words
    assert ("Overall against cost per run (one point per run; cost of the agent's model calls and the judge's); "
            "every run here cost $0 (no model was called: scripted agents, the rules judge)</figcaption>"
            ).replace("'", "&#x27;") in index
    browser = Browser(tmp_path / "profile", width=1280)
    try:
        facts = browser.load((tmp_path / "site" / "index.html").as_uri())
        hidden = browser.call("Runtime.evaluate", {"expression": SCROLLED, "returnByValue": True},
                              session=True)["result"]["value"]
    finally:
        browser.close()
    assert not facts["errors"] and facts["wideCount"] == 0, facts["wide"]
    assert hidden and max(hidden) <= 0, hidden  # nothing of the table behind a scroll bar
