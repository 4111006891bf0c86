"""Red team round 31: results anyone can put on a leaderboard, state shared across trust levels; through the real
runner and CLI.

- **Charts that show two rows as one** (the site's ranking and the `--html` report; round 20's class): the ranking
  keeps an agent's runs of other conditions apart (`agent [conditions]` rows), but its page drew the bars with one
  colour map per label and the Overall-against-cost points with another per agent name, both from the palette's
  first colour, under one legend. Three toy/vowels runs (batch-first under two `--max-turns`, reference once): the
  legend named orange both "reference" and "batch-first [...]", so batch-first's S3 bar (0.0) read as the reference
  agent's, and the reference run's point was drawn in the colour the legend gives another row. The `--html`
  report's Overall histograms were per agent name: one "batch-first (n=2)" panel pooled the two rows, and an
  `evaluate --baseline perfect` result (no agent's run, never a row) had a panel of its own. Now each page has one
  colour per ranking row for every chart and the legend (`colours.series_colours`), each run's point takes its
  row's (`leaderboard.run_labels`), and the histograms are the rows the ranking counts.
- **A page left from the last build** (`leaderboard --site`, the same folder rebuilt): pages were only ever
  written, so a run left out since the last build (here its verdict edited after the fact: "judge.json changed
  since the harness signed the result") kept its page `runs/<id>.html`, with every grade as it stood, in the folder
  a team publishes as it is; so would the ranking of a task or track with no counted run left. A build now records
  its pages (`.site-pages.json`) and the next removes those it did not write again, nothing else
  (`sitefiles`).
- **`view` of a result.json anyone wrote** (the run page, a user with the folder): the unverified path drew the page
  from the file's JSON as it was, so a forged result giving its cost as text ("x") ended `automedbench view` in a
  traceback (ValueError: Unknown format code 'f'), where `show` refuses it in one line. It is now read through the
  Result schema as `show` reads it: refused in one line (exit 2), or drawn with the unverified mark.
- **Colours repeated from the eleventh series** (same pages): the ten-colour palette wrapped, so with eleven agents
  (or agents and conditions) the first and the eleventh were one colour in every chart and legend. Colours beyond
  the palette are now generated, each series its own.

Tried and held (no test kept): the warm evaluator shared by a sweep worker's runs keeps track state between
requests, but every cache is keyed by the file's identity or path (segmentation: path, size and mtime of a frozen
copy whose mtime is the copy's; classification and synthesis: device, inode, size, mtime and ctime), and no two runs
share a frozen path (the pilots' copies are numbered per run and removed); the run page links only within itself, and
`view`, `show`, the site, `codes` and `rejudge` all read a run from a verified copy; `find_runs` never enters a run
folder or a hidden one, so nothing an agent leaves in its workspace or a retried attempt's folder is counted.

Found and left for a design decision: the model gateway forwards whatever model a request names. A mini-swe-agent run
configured `model=m` whose program also asked for "big-model" got both answered (records [("m", 200), ("big-model",
200)], 0 refused), and its result names only `model=m` in its options and conditions: a leaderboard row for one model
can hold runs that used another. Pinning the gateway to the run's model needs a rule for bodies it cannot parse
(over 16 MB) and for systems that call a helper model; recording the served models in the conditions needs the runner
to learn them after the agent phase.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from automedbench.testing import run_cli, run_task

TASK = "toy/vowels"
LEGEND = re.compile(r'background:(#[0-9a-f]{6});vertical-align:middle"></span> ([^<]*)')
BAR = re.compile(r'fill="(#[0-9a-f]{6})"><title>([^<]*) · ')
POINT = re.compile(r'<circle [^>]*fill="(#[0-9a-f]{6})" fill-opacity="0.75"><title>([^<:]*):')
PANEL = re.compile(r'font-weight="bold">([^<]*) \(n=(\d+)\)</text>')


def _legend(page: str) -> dict[str, str]:
    """The ranking legend as label -> colour; asserts a colour names one series and a series has one colour."""
    block = re.search(r'<p class="legend">.*?</p>', page, re.S)
    assert block, "no legend on the ranking"
    entries = [(html.unescape(label).strip(), colour) for colour, label in LEGEND.findall(block.group())]
    labels = [label for label, _ in entries]
    colours = [colour for _, colour in entries]
    assert len(set(labels)) == len(labels), f"a series named twice in the legend: {entries}"
    assert len(set(colours)) == len(colours), f"one colour names two series in the legend: {entries}"
    return dict(entries)


def _label(run_dir: Path) -> str:
    header = json.loads((run_dir / "result.json").read_text())["header"]
    return f"{header['agent']} [{header['hashes']['conditions'][:12]}]"


def test_every_chart_colours_a_run_as_the_ranking_row_it_counts_in(data_root, tmp_path):
    """Before: orange named "reference" and "batch-first [...]" in the legend, the reference run's point was drawn
    orange while its row's bar was green, and the report had panels "batch-first (n=2)" and "baseline:perfect"."""
    runs = tmp_path / "runs"
    made = [run_task(TASK, "batch-first", out=runs, data_root=data_root)[1],
            run_task(TASK, "batch-first", out=runs, data_root=data_root, max_turns=20)[1],
            run_task(TASK, "reference", out=runs, data_root=data_root)[1]]
    done = run_cli("evaluate", "--task", TASK, "--baseline", "perfect", "--data-root", str(data_root),
                   "--out", str(runs / "perfect"))
    assert done.exit_code == 0, done.output
    labels = {json.loads((d / "result.json").read_text())["header"]["run_id"]: _label(d) for d in made}
    assert len(set(labels.values())) == 3, labels  # three rows: batch-first's runs differ in their conditions

    site, report = tmp_path / "site", tmp_path / "board.html"
    done = run_cli("leaderboard", str(runs), "--by", "agent", "--site", str(site), "--html", str(report),
                   "--resamples", "100", "--quiet")
    assert done.exit_code == 0, done.output
    page = (site / "index.html").read_text()
    legend = _legend(page)
    assert set(legend) == set(labels.values()), legend  # the ranking's rows, each once
    bars = BAR.findall(page)
    assert {html.unescape(label) for _, label in bars} == set(labels.values())
    for colour, label in bars:
        assert legend[html.unescape(label)] == colour, (label, colour, legend)
    points = POINT.findall(page)
    assert sorted(run_id for _, run_id in points) == sorted(labels), points
    for colour, run_id in points:
        assert legend[labels[run_id]] == colour, (run_id, colour, legend)

    panels = PANEL.findall(report.read_text())
    assert sorted((html.unescape(label), int(n)) for label, n in panels) == sorted((label, 1) for label in
                                                                                   labels.values()), panels


def test_no_two_series_share_a_colour_however_many_there_are(tmp_path):
    """Before: with twelve agents, the first and the eleventh (and the second and the twelfth) were one colour in
    the ranking's legend and bars, the stage profile and the HTML report's stage chart."""
    from automedbench_campaign.synthetic import write_runs

    agents = [f"agent{k:02d}" for k in range(12)]
    write_runs(tmp_path / "runs", 24, agents=agents, tasks=["segmentation/task00"], tiers=("lite",))
    site, report = tmp_path / "site", tmp_path / "board.html"
    done = run_cli("leaderboard", str(tmp_path / "runs"), "--by", "agent", "--site", str(site), "--html",
                   str(report), "--resamples", "100", "--quiet")
    assert done.exit_code == 0, done.output
    legend = _legend((site / "index.html").read_text())
    assert set(legend) == set(agents)
    for name in ("index.html", "stages.html"):
        bars = BAR.findall((site / name).read_text())
        by_label: dict[str, set[str]] = {}
        for colour, label in bars:
            by_label.setdefault(html.unescape(label), set()).add(colour)
        assert set(by_label) == set(agents), (name, sorted(by_label))
        assert all(len(c) == 1 for c in by_label.values()), (name, by_label)
        owners = {next(iter(c)) for c in by_label.values()}
        assert len(owners) == len(agents), f"{name}: {len(owners)} colours for {len(agents)} agents"
    chart = report.read_text().split('aria-label="mean score per stage"', 1)[1].split("</svg>", 1)[0]
    keys = re.findall(r'width="10" height="10" fill="(#[0-9a-f]{6})"/><text [^>]*>([^<]*)</text>', chart)
    assert sorted(label for _, label in keys) == agents
    assert len({colour for colour, _ in keys}) == len(agents), keys


def test_a_rebuilt_site_keeps_no_page_of_a_run_it_no_longer_counts(data_root, tmp_path):
    """Before: after the edit, runs.html no longer listed the run but runs/<id>.html (its page, Overall and every
    grade as signed) was still in the site folder, beside a file a user had put there."""
    runs, site = tmp_path / "runs", tmp_path / "site"
    _, kept = run_task(TASK, "reference", out=runs, data_root=data_root)
    _, dropped = run_task(TASK, "batch-first", out=runs, data_root=data_root)
    board = ("leaderboard", str(runs), "--site", str(site), "--resamples", "100", "--quiet")
    assert run_cli(*board).exit_code == 0
    pages = {p.relative_to(site).as_posix() for p in site.rglob("*.html")}
    page = f"runs/{dropped.name}.html"
    assert page in pages and f"runs/{kept.name}.html" in pages, pages
    (site / "notes.txt").write_text("the team's own file")
    (site / "runs" / "draft.txt").write_text("another of theirs")

    verdict = json.loads((dropped / "judge.json").read_text())
    for item in verdict["items"]:
        item["value"] = 1.0
    (dropped / "judge.json").write_text(json.dumps(verdict))
    done = run_cli(*board)
    assert done.exit_code == 0, done.output
    now = {p.relative_to(site).as_posix() for p in site.rglob("*.html")}
    assert page not in now, "the page of a run the site no longer counts is still published"
    assert now == pages - {page}, now ^ pages
    assert not any(dropped.name in (site / name).read_text() for name in now)
    assert (site / "notes.txt").exists() and (site / "runs" / "draft.txt").exists()  # only its own pages go

    victim = tmp_path / "victim.html"  # a list naming anything but the site's own pages is never acted on
    victim.write_text("kept")
    (site / ".site-pages.json").write_text(json.dumps(["../victim.html", str(victim), "runs/../../victim.html"]))
    assert run_cli(*board).exit_code == 0
    assert victim.read_text() == "kept"


def test_view_of_a_forged_result_is_one_line_or_an_unverified_page(data_root, tmp_path):
    """Before: a traceback (ValueError: Unknown format code 'f' for object of type 'str') for the cost given as text."""
    _, run_dir = run_task(TASK, "reference", out=tmp_path / "runs", data_root=data_root)
    signed = (run_dir / "result.json").read_text()
    body = json.loads(signed[:signed.rindex(',\n  "proof"')] + "\n}")
    body["runtime"]["cost_usd"] = "x"
    (run_dir / "result.json").write_text(json.dumps(body))
    done = run_cli("view", str(run_dir))
    assert done.exit_code == 2 and "Traceback" not in done.output, done.output
    assert "does not match the Result schema" in done.output and "runtime.cost_usd" in done.output

    body["runtime"]["cost_usd"] = 0.0
    body["aggregate"]["overall"] = 0.999
    (run_dir / "result.json").write_text(json.dumps(body))
    done = run_cli("view", str(run_dir))
    assert done.exit_code == 0, done.output
    page = (run_dir / "view.html").read_text()
    assert 'class="warn">unverified</span>' in page and "not verified as this harness" in page
