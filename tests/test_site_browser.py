"""The campaign site a team publishes, over a real sweep of two scripted agents on two tracks' small demos at
Lite and Standard: a page per track and per task (every table row links to its runs), the paper's analyses as
charts, one score unit (0–1) in the terminal, the one-page HTML and the site; then headless Chromium, driven
over the DevTools protocol (tests/browser.py), loads every page and every run's view.html, follows every link,
and checks there is no console error and nothing wider than a 1366 px (and 1280 px) laptop window."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

import pytest
from automedbench.cli import main
from automedbench.testing import register_toy_track
from browser import CHROMIUM, Browser
from click.testing import CliRunner

pytest.importorskip("automedbench_campaign")
pytestmark = pytest.mark.slow  # eight demo runs, then Chromium over ~30 pages (~1.5 min on two cores)

AGENTS = ("reference", "skip-validate")
TASKS = ("toy/vowels", "vqa/demo")


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    from automedbench_campaign.site import _task_page, _track_page

    register_toy_track()
    root = tmp_path_factory.mktemp("site")
    runs = root / "runs"
    sweep = CliRunner().invoke(main, ["sweep", "--agents", ",".join(AGENTS), "--tasks", ",".join(TASKS), "--tiers",
                                      "lite,standard", "--workers", "2", "--no-require-isolation", "--out", str(runs),
                                      "--data-root", str(root / "data")])
    assert sweep.exit_code == 0, sweep.output
    board = CliRunner().invoke(main, ["leaderboard", str(runs), "--site", str(root / "site"), "--html",
                                      str(root / "report.html"), "--json", str(root / "board.json"), "--by", "agent",
                                      "--resamples", "200"], env={"COLUMNS": "200"})
    assert board.exit_code == 0, board.output
    return {"root": root, "runs": runs, "site": root / "site", "terminal": board.output,
            "track_pages": {t: _track_page(t) for t in ("toy", "vqa")},
            "task_pages": {t: _task_page(t) for t in TASKS}}


def test_every_track_and_task_has_its_page_and_every_row_links_to_its_runs(campaign):
    site = campaign["site"]
    tracks, tasks = (site / "tracks.html").read_text(), (site / "tasks.html").read_text()
    for track, page in campaign["track_pages"].items():
        text = (site / page).read_text()
        assert f"<h1>Track {track}</h1>" in text and f'href="{page}"' in tracks
        for agent in AGENTS:  # the row of (track, agent) leads to that agent's runs on the track page
            anchor = re.search(rf'href="{re.escape(page)}#(agent-[^"]+)">{re.escape(agent)}<', tracks).group(1)
            assert f'id="{anchor}"' in text
        # its four runs, each linked to its run page, and its one task's best run again ("Best run per task")
        assert text.count('href="../runs/') == 4 + 1
    for task, page in campaign["task_pages"].items():
        text = (site / page).read_text()
        assert f"<h1>Task {task}</h1>" in text and f'href="{page}"' in tasks
        # its four runs, and the best one's pictures again beside the case it shows ("What it looks like")
        assert text.count('href="../runs/') == 5 and text.count('#pictures">') == 1
        assert "<svg" in text  # Overall per agent and tier
        for agent in AGENTS:
            assert re.search(rf'href="{re.escape(page)}#agent-[^"]+">{re.escape(agent)}<', tasks)


def test_the_papers_analyses_are_charts(campaign):
    site = campaign["site"]
    index = (site / "index.html").read_text()
    assert index.count("<svg") == 3  # Overall per agent, stage means per agent, Overall against cost
    assert index.count("<circle") == 8  # one point per run against its cost
    assert "Overall against cost" in index and "Mean stage score per agent" in index
    tiers = (site / "tiers.html").read_text()
    assert "<svg" in tiers and "lite" in tiers and "standard" in tiers  # Lite vs Standard per agent
    assert "<svg" in (site / "stages.html").read_text() and "<svg" in (site / "codes.html").read_text()


def test_one_score_unit_in_the_terminal_the_one_page_html_and_the_site(campaign):
    import json

    from automedbench_campaign.viewer.page import num

    rows = {row["agent"]: row for row in json.loads((campaign["root"] / "board.json").read_text())["rows"]}
    skip = num(rows["skip-validate"]["overall"])  # below 1, so a x100 display would show another number
    assert skip.startswith("0.") and skip != "0.000"
    report = (campaign["root"] / "report.html").read_text()
    index = (campaign["site"] / "index.html").read_text()
    for shown in (campaign["terminal"], report, index):
        assert skip in shown and "×100" not in shown
    assert f"{100 * rows['skip-validate']['overall']:.1f}" not in campaign["terminal"]


def _crawl(browser: Browser, starts: list[Path], allowed: Path) -> dict[str, dict]:
    """Load every page reachable from `starts` (HTML links followed, other files checked on disk); every
    problem found is raised at once with the page and the link."""
    seen: dict[str, dict] = {}
    queue = [start.resolve().as_uri() for start in starts]
    wanted: list[tuple[str, str, str]] = []  # (page, target page, fragment) to check once the target is loaded
    while queue:
        url = queue.pop(0)
        if url in seen:
            continue
        facts = browser.load(url)
        seen[url] = facts
        assert not facts["errors"], f"{url}: {facts['errors']}"
        assert facts["title"] and facts["text"] > 0, f"{url}: empty page"
        broken = [src[:80] for src, shown in facts["images"] if not shown]
        assert not broken, f"{url}: pictures that did not load: {broken}"
        for href in facts["links"]:
            parts = urlsplit(href)
            assert not parts.scheme and not parts.netloc, f"{url}: external link {href}"
            target, fragment = urldefrag(urljoin(url, href))
            path = Path(unquote(urlsplit(target).path))
            assert path.resolve().is_relative_to(allowed), f"{url}: {href} leaves the published folders"
            assert path.is_file(), f"{url}: {href} names no file"
            if path.suffix == ".html":
                queue.append(target)
                if fragment:
                    wanted.append((url, target, fragment))
            else:
                assert not fragment, f"{url}: {href} has an anchor into a non-page"
    for page, target, fragment in wanted:
        assert fragment in seen[target]["ids"], f"{page}: #{fragment} names no element of {target}"
    return seen


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/test.sh installs it as root)")
def test_chromium_renders_every_page_follows_every_link_and_nothing_is_wider_than_a_laptop(campaign, tmp_path):
    views = sorted(campaign["runs"].glob("*/view.html"))
    assert len(views) == 8
    browser = Browser(tmp_path / "profile", width=1366)
    try:
        seen = _crawl(browser, [campaign["site"] / "index.html", *views], campaign["root"].resolve())
    finally:
        browser.close()
    pages = {Path(unquote(urlsplit(u).path)).relative_to(campaign["root"].resolve()).as_posix() for u in seen}
    for page in [*campaign["track_pages"].values(), *campaign["task_pages"].values(), "tiers.html", "codes.html"]:
        assert f"site/{page}" in pages  # reached by links alone
    assert sum(p.startswith("site/runs/") for p in pages) == 8 and sum(p.endswith("/view.html") for p in pages) == 8
    for url, facts in seen.items():
        assert facts["width"] == 1366 and facts["scrollWidth"] <= 1366, (url, facts["scrollWidth"])
        assert facts["wideCount"] == 0, f"{url} at 1366 px: {facts['wide']}"
    browser = Browser(tmp_path / "profile-1280", width=1280)
    try:
        for name in ("index.html", "tracks.html", "tasks.html", "tiers.html", "stages.html"):
            facts = browser.load((campaign["site"] / name).as_uri())
            assert not facts["errors"] and facts["wideCount"] == 0, (name, facts["wide"], facts["errors"])
    finally:
        browser.close()
