"""The run viewer and the campaign site: every evidence link resolves, hostile agent text stays text, huge
runs stay bounded, a breach, an incomplete submission and a text-only reply show their cause, and the
pages render in headless Chromium at a desktop's 1400 px and a phone's 400 px."""

from __future__ import annotations

import html.parser
import json
import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote, urlsplit

import numpy as np
import pytest
from automedbench.agent import Agent
from automedbench.cli import main
from automedbench.records import AgentTurn, ToolCall
from automedbench.runfolder import RunFolder
from automedbench.testing import register_agent, register_toy_track, run_task
from automedbench_campaign.site import PAGES, write_site
from automedbench_campaign.store import load_table
from automedbench_campaign.viewer.runpage import MAX_TURNS, render_run
from click.testing import CliRunner
from runpage_checks import check_run_page, parse_page

TOY = "toy/vowels"
HOSTILE = ('<script>alert(1)</script> "><img src=x onerror=alert(2)> \x1b[31mred\x1b[0m \u2028 '
           "</pre></details><iframe src=http://example.com>")


class Links(html.parser.HTMLParser):
    """Every id on a page and every href, and any element that could run script or fetch."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.hrefs: list[str] = []
        self.active: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if "href" in attrs:
            self.hrefs.append(attrs["href"])
        if tag in ("script", "iframe", "object", "embed", "link") or any(k.startswith("on") for k in attrs):
            self.active.append(tag)
        # images only as embedded PNG data (plan.png re-encoded, case pictures): never fetched from anywhere
        if tag == "img" and (not str(attrs.get("src", "")).startswith("data:image/png;base64,") or
                             set(attrs) - {"src", "alt"}):
            self.active.append(tag)


def parse(text: str) -> Links:
    links = Links()
    links.feed(text)
    return links


def check_links(page: Path) -> Links:
    """Every in-page anchor names an element; every relative link names a file (and its anchor) that exists."""
    links = parse(page.read_text())
    for href in links.hrefs:
        parts = urlsplit(href)
        assert not parts.scheme and not parts.netloc, f"{page.name}: external link {href}"
        target = page if not parts.path else (page.parent / unquote(parts.path))
        assert target.is_file(), f"{page.name}: {href} names no file"
        if parts.fragment:
            ids = links.ids if target == page else parse(target.read_text()).ids
            assert parts.fragment in ids, f"{page.name}: {href} names no element"
    assert links.active == [], f"{page.name}: active elements {links.active}"
    return links


class TalkerAgent(Agent):
    """Writes hostile text into its replies, its code and its output; then replies with text only."""

    name = "viewer-talker"

    def __init__(self, **_: str) -> None:
        self.turn = 0

    def next_turn(self, messages):
        self.turn += 1
        if self.turn == 1:
            code = f"print({HOSTILE!r} * 3)\nimport sys; sys.stderr.write('x' * 5000)"
            return AgentTurn(HOSTILE, [ToolCall("c1<b>", "execute_code", json.dumps({"language": "python",
                                                                                     "code": code}))],
                             reasoning=HOSTILE)
        return AgentTurn("I think the task is done. " + HOSTILE, [])


@pytest.fixture(scope="module")
def toy_runs(tmp_path_factory):
    register_toy_track()
    register_agent(TalkerAgent)
    out = tmp_path_factory.mktemp("viewer-runs")
    data = tmp_path_factory.mktemp("viewer-data")
    runs = {name: run_task(TOY, agent, out=out, data_root=data)
            for name, agent in (("reference", "reference"), ("talker", "viewer-talker"),
                                ("breach", "breach"), ("incomplete", "incomplete"))}
    runs["skip-validate"] = run_task(TOY, "skip-validate", out=out, data_root=data, pictures=False)
    return out, runs


@pytest.mark.parametrize("name", ["reference", "talker", "breach", "incomplete", "skip-validate"])
def test_every_stage_item_links_evidence_on_the_page_and_every_case_has_its_picture(toy_runs, name):
    _, runs = toy_runs
    result, run_dir = runs[name]
    if name == "skip-validate":  # --no-pictures: nothing drawn, the page says so, every grade still links
        assert not (run_dir / "pictures").exists()
        page = parse_page(run_dir / "view.html")
        assert not page.figures and "--no-pictures" in (run_dir / "view.html").read_text()
        for item, links in page.item_links.items():
            assert any(h[1:] in page.ids for h in links if h.startswith("#")), item
        return
    page = check_run_page(run_dir, images=False)  # the toy's cases are words: their texts, no image
    text = (run_dir / "view.html").read_text()
    if name == "incomplete":  # S4/S5 fall short: they link the missing cases' rows
        missing = [c.case_id for c in result.cases if not c.present]
        completion = next(i for s in result.stages for i in s.items if i.id == "s4_completion")
        assert missing and completion.evidence_cases == missing
        cases = [c.case_id for c in result.cases]
        assert all(f"#case-{cases.index(c)}" in page.item_links["s4_completion"] for c in missing)
    if name == "reference":  # the plan items link to plan.md and plan.png, shown on the page
        assert 'id="plan-md"' in text and "#plan-md" in page.item_links["s1a_plan_md"]
        assert "#plan-png" in page.item_links["s1e_plan_png"] or result.header.tier == "lite"


def test_a_stored_result_without_evidence_fields_links_the_turns_its_rationale_names(toy_runs, tmp_path):
    """Results stored before verdicts carried files and cases (or turns) still link: "turn N" in the rationale."""
    _, runs = toy_runs
    _, run_dir = runs["reference"]
    old = tmp_path / "old"
    shutil.copytree(run_dir, old, ignore=shutil.ignore_patterns("workspace"))
    data = json.loads((old / "result.json").read_text())
    for stage in data["stages"]:
        for item in stage["items"]:
            item.pop("evidence_files", None)
            item.pop("evidence_cases", None)
            item["evidence_turns"] = []
            if item["id"] == "s3_validate":
                item["rationale"] = "rules: no pilot check: turn 5 ran the batch, see turns 3 and 4"
    (old / "result.json").write_text(json.dumps(data))
    (old / "view.html").write_text(render_run(RunFolder(old)))
    page = parse_page(old / "view.html")
    assert page.item_links["s3_validate"][:3] == ["#turn-5", "#turn-3", "#turn-4"]
    for item, links in page.item_links.items():
        assert any(h.startswith("#") and h[1:] in page.ids for h in links), item


def test_picture_index_entries_are_text_and_name_only_the_runs_own_pictures(toy_runs, tmp_path):
    """The index is the evaluator's, but the page trusts nothing in it: a file name outside `case-NNNN.png` is not
    read, texts are escaped, and `render_run(pictures=False)` leaves every picture out (a site of licensed data)."""
    _, runs = toy_runs
    _, run_dir = runs["reference"]
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("workspace"))
    index = json.loads((copy / "pictures" / "index.json").read_text())
    index["cases"][0].update(file="../result.json", texts=[{"title": HOSTILE, "text": HOSTILE, "role": "<b>"}],
                             caption=HOSTILE)
    (copy / "pictures" / "index.json").write_text(json.dumps(index))
    page = render_run(RunFolder(copy))
    assert "<script" not in page.lower() and "&lt;script&gt;alert(1)" in page
    assert page.count("data:image/png") == 1  # plan.png only: the toy draws no image, and ../result.json is not read
    bare = render_run(RunFolder(copy), pictures=False)
    assert 'id="picture-0"' not in bare and "#picture-0" not in bare


def test_a_site_published_without_pictures_has_none_on_its_run_pages(toy_runs, tmp_path):
    out, runs = toy_runs
    site = tmp_path / "site"
    cli = CliRunner().invoke(main, ["leaderboard", str(out), "--site", str(site), "--no-pictures", "--quiet",
                                    "--resamples", "100", "--include-unverified"])
    assert cli.exit_code == 0, cli.output
    result, _ = runs["reference"]
    page = (site / "runs" / f"{result.header.run_id}.html").read_text()
    assert 'id="picture-' not in page and 'id="stages"' in page


@pytest.mark.slow  # whole demo runs
def test_every_run_folder_gets_a_view_page_whose_links_resolve(toy_runs):
    _, runs = toy_runs
    result, run_dir = runs["reference"]
    page = run_dir / "view.html"
    links = check_links(page)
    text = page.read_text()
    # every rubric item with its verdict, and every evidence turn it names linked to that turn's section
    for stage in result.stages:
        for item in stage.items:
            assert f'id="item-{item.id}"' in text
            for turn in item.evidence_turns:
                assert f'href="#turn-{turn}"' in text and f"turn-{turn}" in links.ids
    assert any(i.evidence_turns for s in result.stages for i in s.items)
    assert f"Run {result.header.run_id}" in text and f"rating {result.aggregate.rating}" in text
    for case in result.task.per_case:
        assert case["case_id"] in text
    assert text.count('class="turn"') == result.runtime.turns


def test_hostile_agent_text_is_escaped_and_the_text_only_reply_shows_its_cause(toy_runs):
    _, runs = toy_runs
    result, run_dir = runs["talker"]
    text = (run_dir / "view.html").read_text()
    check_links(run_dir / "view.html")  # no script, iframe, img or on* attribute came through
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "<script" not in text.lower()
    assert "\x1b" not in text and "\u2028" not in text
    assert "no tool call" in text and result.end_reason in text  # the run's end and why
    assert "<summary>stderr (5000 characters)</summary>" in text  # the long stderr is there, folded


def test_breach_and_incomplete_submission_render_their_cause(toy_runs):
    _, runs = toy_runs
    result, run_dir = runs["breach"]
    text = (run_dir / "view.html").read_text()
    assert result.isolation.breached and "Breach evidence" in text and "BREACH" in text
    evidence = result.isolation.evidence[0]
    assert f'href="#turn-{evidence.turn}"' in text
    result, run_dir = runs["incomplete"]
    text = (run_dir / "view.html").read_text()
    missing = [c for c in json.loads((run_dir / "evaluation.json").read_text())["cases"] if not c["present"]]
    table = text.split('id="cases"')[1].split("</table>")[0]  # the case table (the pictures repeat each status)
    assert missing and table.count('<span class="bad">missing</span>') == len(missing)
    assert missing[0]["reasons"][0].split(" ")[0] in text


def test_view_command_writes_where_asked_and_says_where(toy_runs, tmp_path):
    _, runs = toy_runs
    _, run_dir = runs["reference"]
    out = tmp_path / "page.html"
    cli = CliRunner().invoke(main, ["view", str(run_dir), "--out", str(out)])
    assert cli.exit_code == 0 and cli.output.strip() == str(out)
    assert out.read_text() == render_run(RunFolder(run_dir))  # the stored record, rendered by the command
    live = (run_dir / "view.html").read_text()  # written during the run, before the final timings
    assert live.split('id="stages"')[1] == out.read_text().split('id="stages"')[1]  # stages onward identical
    bad = CliRunner().invoke(main, ["view", str(tmp_path / "nope")])
    assert bad.exit_code == 2 and len(bad.output.strip().splitlines()) == 1


def test_a_huge_run_page_is_bounded(toy_runs, tmp_path):
    _, runs = toy_runs
    _, run_dir = runs["reference"]
    big = tmp_path / "big"
    shutil.copytree(run_dir, big, ignore=shutil.ignore_patterns("workspace"))
    with (big / "trajectory.jsonl").open("a") as handle:
        for turn in range(100, 100 + 3 * MAX_TURNS):
            handle.write(json.dumps({"type": "assistant", "turn": turn, "content": "y" * 200_000,
                                     "tool_calls": []}) + "\n")
    page = render_run(RunFolder(big))
    assert len(page) < 30 * MAX_TURNS * 1000  # well under the 60 MB of text the turns hold
    assert "later turns not shown" in page and "more characters not shown" in page


def test_campaign_site_pages_link_to_each_run_and_keep_one_meaning_per_colour(toy_runs, tmp_path):
    out, runs = toy_runs
    site = tmp_path / "site"
    table = load_table([out])
    write_site(table, site, resamples=200)
    for name, _ in PAGES:
        check_links(site / name)
    runs_page = (site / "runs.html").read_text()
    for result, _ in runs.values():
        assert f'href="runs/{result.header.run_id}.html"' in runs_page
        check_links(site / "runs" / f"{result.header.run_id}.html")
    stages = (site / "stages.html").read_text()
    agents = sorted({r.header.agent for r, _ in runs.values()})
    legend = stages.split('class="legend"')[1].split("</p>")[0]
    assert all(a in legend for a in agents)
    # one colour per agent in the stage chart, and the legend uses the same colours
    fills = {f for f in (s.split('"')[0] for s in stages.split('fill="')[1:])}
    assert len(fills) <= len(agents)
    codes = (site / "codes.html").read_text()
    assert len({s.split('"')[0] for s in codes.split('fill="')[1:]}) == 1  # bars are categories: one colour


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars"]


def _chromium_pages(toy_runs, tmp_path) -> tuple[Path, Path, Path]:
    """The pages the Chromium tests open: a run's view.html (hostile agent text in it) and two pages of a site."""
    out, runs = toy_runs
    site = tmp_path / "site"
    write_site(load_table([out]), site, resamples=200)
    _, run_dir = runs["talker"]
    return run_dir / "view.html", site / "index.html", site / "tiers.html"


@pytest.mark.slow  # starts headless Chromium
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/test.sh installs it as root)")
@pytest.mark.parametrize("width", [1400, 400])
def test_pages_render_in_headless_chromium_at_desktop_and_phone_width(toy_runs, tmp_path, width):
    from PIL import Image

    for page in _chromium_pages(toy_runs, tmp_path):
        shot = tmp_path / f"{page.stem}-{width}.png"
        done = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
                               f"--window-size={width},1600", f"--screenshot={shot}", page.as_uri()],
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
        image = np.asarray(Image.open(shot).convert("RGB")).astype(int)
        assert image.shape[:2] == (1600, width)
        ink = (image < 160).any(axis=2)
        assert ink.mean() > 0.002  # text was drawn
        # nothing runs off the right edge: wide tables scroll in their own box inside the margin
        assert not ink[:, -4:].any(), f"{page.name} at {width}px draws at the right edge"


@pytest.mark.slow  # starts headless Chromium
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/test.sh installs it as root)")
def test_pages_in_headless_chromium_run_no_script_and_keep_hostile_text_as_text(toy_runs, tmp_path):
    """The DOM Chromium builds (no window size in it: once, not once per width as when it was part of the test
    above, which dumped the same pages the same way at each width: three Chromium starts fewer)."""
    for page in _chromium_pages(toy_runs, tmp_path):
        dom = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
                              page.as_uri()], capture_output=True, text=True, timeout=180)
        assert dom.returncode == 0 and "<script" not in dom.stdout.lower()
        if page.name == "view.html":
            assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom.stdout  # hostile text stayed text in the DOM


def test_the_page_written_at_the_end_of_a_run_shows_its_times_not_zeros(toy_runs):
    """view.html is written by a run-finished subscriber, before result.json: it gets the times so far (it showed
    'wall 0.0 s' and 'harness 0.0 s' on every run)."""
    import re

    result, run_dir = toy_runs[1]["reference"]
    text = (run_dir / "view.html").read_text()
    wall = float(re.search(r"wall ([0-9.]+) s", text).group(1))
    harness = float(re.search(r"harness ([0-9.]+) s", text).group(1))
    assert 0 < wall <= result.runtime.wall_s and 0 < harness <= result.runtime.harness_s


def test_a_reply_whose_provider_reported_no_tokens_says_so_not_zero():
    """An installed agent's reply seen by the gateway with no token counts (llama-cpp-python's streams): the page
    says the tokens were not reported, where a metered reply shows its counts."""
    from automedbench_campaign.viewer.runpage import _event

    seen = {"type": "assistant", "turn": 1, "content": "hi", "tool_calls": [], "tokens_in": 0, "tokens_out": 0,
            "latency_s": 2.0, "finish_reason": "stop", "observed_by": "gateway"}
    assert "tokens not reported by the provider" in _event(seen)
    assert "tokens 12 in / 3 out" in _event({**seen, "tokens_in": 12, "tokens_out": 3})
    assert "tokens 0 in / 0 out" in _event({k: v for k, v in seen.items() if k != "observed_by"})
