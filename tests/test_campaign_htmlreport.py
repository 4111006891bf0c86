"""The HTML leaderboard report: labels that fit, CIs only where there is something to resample, histograms
with a count axis; rendered by headless Chromium at a wide and a narrow window."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest
from automedbench_campaign import htmlreport
from automedbench_campaign.htmlreport import CHAR_PX, code_plot, distribution_plot, render_html
from automedbench_campaign.leaderboard import build
from automedbench_campaign.store import load_table
from automedbench_campaign.synthetic import write_runs


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("html")
    write_runs(root / "runs", 60, seed=2, agents=["opus", "gpt", "qwen"], tasks=["seg/a", "vqa/b"])
    write_runs(root / "runs" / "single", 1, seed=3, agents=["solo-agent-with-a-long-name"], tasks=["seg/a"])
    table = load_table([root / "runs"])
    board = build(table, resamples=200)
    page = root / "report.html"
    page.write_text(render_html(board, table))
    return root, board, table, page


def test_score_cells_show_a_ci_only_from_two_runs():
    # scores 0-1 cut to three places, the unit of `run`, the terminal leaderboard and the site
    assert htmlreport._score_cell({"mean": 0.9569, "lo": 0.9569, "hi": 0.9569, "n": 1}) == "0.956"
    assert htmlreport._score_cell({"mean": 0.5, "lo": 0.4, "hi": 0.61, "n": 2}) == "0.500<small>0.400–0.610</small>"
    assert htmlreport._score_cell({"mean": None, "lo": None, "hi": None, "n": 0}) == "–"


def test_single_run_row_has_no_interval(report):
    _, board, _, page = report
    html = page.read_text()
    row = re.search(r"<tr><td class=\"k\">solo-agent-with-a-long-name</td>.*?</tr>", html).group(0)
    assert "<small>" not in row and "[" not in row
    assert html.count("<small>") == 8 * (len(board.cells) - 1)  # 3 aggregates + 5 stages per multi-run row


def _texts(svg: str) -> list[tuple[float, str, str]]:
    """(x, text-anchor, text) of every <text> element."""
    out = []
    for attrs, text in re.findall(r"<text ([^>]*)>([^<]*)</text>", svg):
        anchor = re.search(r'text-anchor="(\w+)"', attrs)
        out.append((float(re.search(r'\bx="([\d.]+)"', attrs).group(1)), anchor.group(1) if anchor else "start", text))
    return out


def test_code_share_labels_fit_inside_the_plot(report):
    _, board, _, _ = report
    board.analyses["codes"]["shares"] = {c: 1.0 if c == "E3" else 0.0 for c in board.analyses["codes"]["shares"]}
    board.analyses["codes"]["counts"] = {c: 12345 if c == "E3" else 0 for c in board.analyses["codes"]["counts"]}
    svg = code_plot(board)
    width = float(re.search(r'width="(\d+)"', svg).group(1))
    for x, anchor, text in _texts(svg):
        assert anchor == "start" and x + CHAR_PX * len(text) <= width, (x, text, width)
    bar_x = min(float(x) for x in re.findall(r'<rect x="([\d.]+)" y="\d+" width="[\d.]+" height="18"', svg))
    longest = max(len(t) for x, _, t in _texts(svg) if x == 4)
    assert 4 + CHAR_PX * longest < bar_x  # names end before the bars start


def test_histograms_have_a_count_axis_and_readable_ticks(report):
    _, _, table, _ = report
    svg = distribution_plot(table)
    texts = [t for _, _, t in _texts(svg)]
    assert texts.count("Overall") == 4 and texts.count("runs") == 4  # scores 0-1, as in `run` and the site
    for tick in ("0.0", "0.2", "0.4", "0.6", "0.8", "1.0"):
        assert texts.count(tick) >= 4
    counts = np.histogram(table["overall"][np.array([a == "gpt" for a in table["agent"]])], np.linspace(0, 1, 11))[0]
    gpt = svg[svg.index("gpt (n="):svg.index("opus (n=")]
    y_ticks = [int(t) for _, anchor, t in _texts(gpt) if anchor == "end"]
    assert y_ticks[0] == 0 and y_ticks[-1] >= counts.max() and len(y_ticks) <= 6  # whole numbers up to the peak
    assert len(set(np.diff(y_ticks))) == 1
    assert htmlreport._nice_step(1) == 1 and htmlreport._nice_step(7) == 2 and htmlreport._nice_step(19) == 5
    assert htmlreport._nice_step(120) == 50


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/test.sh installs it as root)")
@pytest.mark.parametrize("width", [1400, 800])
def test_report_in_headless_chromium_wide_and_narrow(report, width):
    from PIL import Image

    root, _, _, page = report
    shot = root / f"shot-{width}.png"
    run = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={root / f'profile-{width}'}",
                          f"--window-size={width},2200", f"--screenshot={shot}", page.resolve().as_uri()],
                         capture_output=True, text=True, timeout=180)
    assert run.returncode == 0 and shot.is_file(), run.stderr[-2000:]
    image = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    assert image.shape[:2] == (2200, width)
    colourful = (image.max(axis=2) - image.min(axis=2)) > 60
    rows = np.flatnonzero(colourful.any(axis=1))
    assert colourful.mean() > 0.01 and rows.size
    # the four plots are all on the page: coloured rows reach well below the leaderboard table
    assert rows.max() > 900
    # nothing is drawn at the right edge (no text, border or bar cut off): the table scrolls in its own box
    # inside the page margin, and every plot is narrower than 800 px
    assert not (image[:, -6:] < 180).any() and not colourful[:, -6:].any()
