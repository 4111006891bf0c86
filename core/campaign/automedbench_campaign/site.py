"""`automedbench leaderboard RUNS --site DIR`: a folder of linked offline pages answering the paper's questions.

Pages: the ranking per agent (Overall, Agentic, Task and S1–S5 with bootstrap CIs, rating counts, cost, turns) with
the Overall, stage and score-against-cost charts; per track and per task, each with a page of its own
(`track/<name>.html`, `task/<name>.html`: its table, chart and runs; a task's also one case of its best run in
pictures); Lite versus Standard per agent (the paper's tier analysis), the stage profile per agent, error-code
shares, and every run with a link to its own page (`runs/<id>.html`, the run viewer). Every table row links to its
runs. Scores are 0–1 cut to three places, as `run`, `show` and the terminal leaderboard print them. In each chart a
colour means one thing only: an agent, a tier or a single series, always with a legend. No script, no external
asset; the tables fit a laptop's 1280–1440 px (a CI sits under its mean), and scroll in their own box below that.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from automedbench.api import E_CODES, STAGE_NAMES, STAGES, atomic_write_text
from automedbench.engine import RunFolder, copy_verified, registry

from .attemptcount import Attempts
from .colours import series_colours
from .leaderboard import (
    CONDITIONS,
    RATINGS,
    Cell,
    Leaderboard,
    agent_label,
    build,
    conditions_words,
    extremes,
    judges_words,
    run_labels,
    tied,
)
from .sitefiles import previous_pages, record_pages
from .sitepictures import BestSamples
from .sitetrack import best_runs, rating_bands, task_data, track_description, tracks_measured
from .store import RunTable
from .viewer.page import document, esc, num
from .viewer.runpage import render_run

TIER_COLOURS = {"lite": "#4c78a8", "standard": "#f58518", "pro": "#54a24b"}
SERIES_COLOUR = "#6b6ecf"
PAGES = [("index.html", "Ranking"), ("tracks.html", "Tracks"), ("tasks.html", "Tasks"),
         ("tiers.html", "Lite vs Standard"), ("stages.html", "Stage profile"), ("codes.html", "Error codes"),
         ("runs.html", "All runs")]
MAX_RUN_PAGES = 5000  # run pages written; beyond it runs are listed without a page (the note says so)


def run_page_name(run_id: str, taken: set[str] | frozenset[str] = frozenset(), path: str = "") -> str:
    """`runs/<run id, made safe>.html`; a name already `taken` (the same id in another sweep folder, or ids
    that agree in their first 120 characters; compared without case, as a case-blind disk would) gets a hash of
    the run's folder, so no page overwrites another."""
    stem = "runs/" + (re.sub(r"[^A-Za-z0-9_.-]", "_", run_id)[:120].lstrip(".") or "run")
    name, n = stem + ".html", 0
    while name.lower() in taken:
        n += 1
        name = f"{stem}-{hashlib.sha256(f'{path}{chr(0)}{n}'.encode()).hexdigest()[:10]}.html"
    return name


# The site's own rules beside the viewer's stylesheet: a CI under its mean keeps score columns narrow, charts sit
# side by side where there is room, and a key cell's long name wraps instead of widening the table.
SITE_CSS = ("<style>.ci{display:block;font-size:11px;white-space:nowrap}.charts{display:flex;flex-wrap:wrap;gap:16px}"
            ".charts figure{flex:1 1 380px;max-width:640px;margin:0}figcaption{font-size:12px;color:#5b6472}"
            "td.key{word-break:break-word;min-width:8em}th,td{padding:3px}th.n{white-space:normal}"
            "main{max-width:1400px}</style>")  # a ranking fits 1280 px: it was 1200 px wide in a 1168 px box


def _nav(current: str, up: str = "") -> str:
    links = " ".join(f'<a href="{up}{href}"{" aria-current=page" if href == current else ""}>{esc(label)}</a>'
                     for href, label in PAGES)
    return f"<nav>{links}</nav>"


def _ci(score: dict[str, Any]) -> str:
    if score.get("mean") is None:
        return "–"
    if (score.get("n") or 0) < 2 or score.get("lo") is None:  # one run: nothing to resample
        return num(score["mean"])
    return f'{num(score["mean"])}<small class="ci muted">[{num(score["lo"])}–{num(score["hi"])}]</small>'


def _ratings(ratings: dict[str, int]) -> str:
    return " ".join(f'<span class="badge {r}">{r} {ratings.get(r, 0)}</span>' for r in RATINGS if ratings.get(r))


Links = dict[str, Callable[[dict[str, str]], str]]


def _table(board: Leaderboard, keys: tuple[str, ...], links: Links | None = None) -> str:
    """One row per cell, best Overall first; `links` maps a key column to the href of its cell (the runs). Runs
    made under different conditions are other cells (`leaderboard.build`): their column is shown then."""
    if CONDITIONS in board.by and CONDITIONS not in keys:
        keys = (*keys, CONDITIONS)
    head = "".join(f"<th>{esc(k)}</th>" for k in keys)
    head += "".join(f'<th class="n">{esc(m)}</th>' for m in ("n", "Overall", "Agentic", "Task", *STAGES))
    head += ('<th>ratings</th><th class="n">turns</th><th class="n">cost $</th><th class="n">with codes</th>'
             '<th>runs made</th>')
    cells = sorted(board.cells, key=lambda c: -(c.scores["overall"]["mean"] or -1))
    rows = []
    for cell in cells:
        keyed = ""
        for k in keys:
            text = esc(cell.key[k], 200)
            href = links[k](cell.key) if links and k in links else ""
            keyed += f'<td class="key">{f"<a href={chr(34)}{esc(href)}{chr(34)}>{text}</a>" if href else text}</td>'
        scores = "".join(f'<td class="n">{_ci(cell.scores[m])}</td>' for m in ("overall", "agentic", "task", *STAGES))
        rows.append(f'<tr>{keyed}<td class="n">{cell.n}</td>{scores}<td>{_ratings(cell.ratings)}</td>'
                    f'<td class="n">{cell.turns:.1f}</td><td class="n">{cell.cost_usd:.4f}</td>'
                    f'<td class="n">{100 * cell.with_code_share:.0f} %</td>{_made(cell.attempts)}</tr>')
    legend = (f'<p class="note">Conditions (rows of other options are never pooled): {esc(conditions_words(board))}'
              "</p>") if CONDITIONS in keys and board.conditions else ""
    return f'<div class="scroll"><table><tr>{head}</tr>{"".join(rows)}</table></div>{legend}'


def _slug(text: str) -> str:
    """An anchor for `text`: readable, and unique per text (a hash of it: "a.b" and "a_b" read the same)."""
    digest = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:8]
    return re.sub(r"[^A-Za-z0-9_-]", "_", text)[:80] + "-" + digest


def _legend(items: list[tuple[str, str]]) -> str:
    return '<p class="legend">' + " ".join(
        f'<span style="display:inline-block;width:12px;height:12px;background:{colour};vertical-align:middle">'
        f"</span> {esc(label, 100)}" for label, colour in items) + "</p>"


def _bars(groups: list[tuple[str, list[tuple[str, float | None]]]], colours: dict[str, str], title: str,
          top: float = 1.0) -> str:
    """Grouped vertical bars, one colour per series name (the legend says which), scaled to fit any width."""
    series = list(colours)
    width, height, x0, y0, plot_h = 640, 260, 40, 220, 190
    group_w = (width - x0 - 10) / max(1, len(groups))
    bar = max(2.0, (group_w - 10) / max(1, len(series)))
    body = [f'<line x1="{x0}" y1="{y0}" x2="{width - 10}" y2="{y0}" stroke="#333"/>']
    for i in range(6):
        y = y0 - plot_h * i / 5
        body.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{width - 10}" y2="{y:.1f}" stroke="#eee"/>'
                    f'<text x="{x0 - 4}" y="{y + 4:.1f}" text-anchor="end">{top * i / 5:.1f}</text>')
    for gi, (label, values) in enumerate(groups):
        gx = x0 + gi * group_w + 5
        for name, value in values:
            if value is None:
                continue
            si = series.index(name)
            h = plot_h * min(1.0, value / top if top else 0)
            body.append(f'<rect x="{gx + si * bar:.1f}" y="{y0 - h:.1f}" width="{bar - 1:.1f}" height="{h:.1f}" '
                        f'fill="{colours[name]}"><title>{esc(name, 100)} · {esc(label, 100)}: {value:.3f}'
                        "</title></rect>")
        body.append(f'<text x="{gx + group_w / 2 - 5:.1f}" y="{y0 + 16}" text-anchor="middle">{esc(label, 30)}</text>')
    return (f'<figure><svg viewBox="0 0 {width} {height}" width="100%" style="max-width:{width}px" role="img" '
            f'aria-label="{esc(title, 200)}" font-size="11" font-family="sans-serif">{"".join(body)}</svg>'
            f"<figcaption>{esc(title, 300)}</figcaption></figure>")


def _scatter(table: RunTable, labels: list[str | None], colours: dict[str, str], title: str) -> str:
    """Overall (y, 0–1) against cost in dollars (x, from 0 to the dearest run) per finished run, one colour per
    row of the ranking (`labels`: each run's, as the bars name it; the legend beside the chart says which); runs
    without an Overall are left out and counted."""
    width, height, x0, y0, plot_w, plot_h = 640, 280, 48, 230, 570, 200
    overall, cost = table["overall"], table["cost_usd"] + table["judge_cost_usd"]
    shown = [i for i in range(len(table)) if overall[i] == overall[i] and labels[i] in colours]
    top = max([float(cost[i]) for i in shown] + [0.0])
    top = top * 1.05 if top > 0 else 1.0
    body = [f'<line x1="{x0}" y1="{y0}" x2="{x0 + plot_w}" y2="{y0}" stroke="#333"/>'
            f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y0 - plot_h}" stroke="#333"/>']
    for k in range(6):
        y, x = y0 - plot_h * k / 5, x0 + plot_w * k / 5
        body.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + plot_w}" y2="{y:.1f}" stroke="#eee"/>'
                    f'<text x="{x0 - 4}" y="{y + 4:.1f}" text-anchor="end">{k / 5:.1f}</text>'
                    f'<text x="{x:.1f}" y="{y0 + 16}" text-anchor="middle">{top * k / 5:.3g}</text>')
    body.append(f'<text x="{x0 + plot_w / 2}" y="{y0 + 34}" text-anchor="middle" fill="#555">cost per run ($)</text>'
                f'<text x="12" y="{y0 - plot_h / 2}" text-anchor="middle" fill="#555" '
                f'transform="rotate(-90 12 {y0 - plot_h / 2})">Overall</text>')
    for i in shown:
        x, y = x0 + plot_w * float(cost[i]) / top, y0 - plot_h * float(overall[i])
        body.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{colours[str(labels[i])]}" fill-opacity="0.75">'
                    f'<title>{esc(table["run_id"][i], 120)}: Overall {num(float(overall[i]))}, '
                    f'${float(cost[i]):.4f}</title></circle>')
    left_out = len(table) - len(shown)
    note = f" ({left_out} run(s) without an Overall left out)" if left_out else ""
    if shown and not any(float(cost[i]) for i in shown):  # an axis of dollars with every point on 0 said nothing
        tokens = table.columns.get("model_tokens")
        called = sum(1 for i in shown if tokens is not None and tokens[i] > 0)
        note += ("; every run here cost $0 (no model was called: scripted agents, the rules judge)" if not called else
                 f"; every run here cost $0, though {called} run(s) spent model tokens: no price is known for their "
                 "models (an agent's or judge's prices=FILE, or the model config's pricing:, gives one)")
    return (f'<figure><svg viewBox="0 0 {width} {height}" width="100%" style="max-width:{width}px" role="img" '
            f'aria-label="{esc(title, 200)}" font-size="11" font-family="sans-serif">{"".join(body)}</svg>'
            f"<figcaption>{esc(title + note, 400)}</figcaption></figure>")


def _who(cell: Cell) -> str:
    """A cell's agent as charts and per-tier tables name it: with its conditions when the board split a row by
    them, so two conditions of one agent are two labelled bars and rows, never one hiding the other."""
    return agent_label(cell.key["agent"], cell.key.get(CONDITIONS))


def _ranking(table: RunTable, resamples: int, seed: int) -> str:
    board = build(table, by=("agent",), resamples=resamples, seed=seed, include_unverified=True)
    used, total = board.runs_used, board.runs_total
    excluded = ", ".join(f"{n} {state}" for state, n in board.excluded.items())
    note = (f'<p class="note">{used} finished runs of {total}'
            + (f" ({excluded} left out: the harness's failures, not the agent's)" if excluded else "")
            + f"; 95 % percentile-bootstrap CIs, {resamples} resamples, seed {seed}. Turns per run "
              f"{num(board.analyses.get('turns_per_run'), 2)}."
            + (f" {esc(graders, 1200)}." if (graders := judges_words(board)) else "") + "</p>")
    # one colour per row of the ranking, for every chart and the one legend: a colour map per agent beside one per
    # agent and conditions, both from the first palette colour, gave one colour to two series (the legend named
    # another agent's bar)
    rows = series_colours(sorted({_who(c) for c in board.cells}))
    charts = [
        _bars([("Overall", [(_who(c), c.scores["overall"]["mean"]) for c in board.cells])], rows,
              "Mean Overall per agent" + (" and conditions" if CONDITIONS in board.by else "")),
        _bars([(stage, [(a, v["stages"].get(stage, {}).get("mean")) for a, v in
                        sorted(board.analyses["stages"]["by_agent"].items())]) for stage in STAGES], rows,
              "Mean stage score per agent" + (" and conditions" if CONDITIONS in board.by else "")),
        _scatter(table, run_labels(table, include_unverified=True), rows,
                 "Overall against cost per run (one point per run; cost of the agent's model calls and the judge's)"),
    ]
    return ("<h1>Ranking per agent</h1>" + note
            + _table(board, ("agent",), {"agent": lambda key: f"runs.html#agent-{_slug(key['agent'])}"})
            + _legend(list(rows.items()))
            + f'<div class="charts">{"".join(charts)}</div>')


def _tiers(table: RunTable, resamples: int, seed: int) -> str:
    board = build(table, by=("agent", "tier"), resamples=resamples, seed=seed, include_unverified=True)
    tiers = [t for t in ("lite", "standard", "pro") if any(c.key["tier"] == t for c in board.cells)]
    agents = sorted({_who(c) for c in board.cells})
    by = {(_who(c), c.key["tier"]): c for c in board.cells}
    rows = []
    for agent in agents:
        cells = "".join(f'<td class="n">{_ci(by[(agent, t)].scores["overall"]) if (agent, t) in by else "–"}</td>'
                        for t in tiers)
        lite, std = by.get((agent, "lite")), by.get((agent, "standard"))
        gap = (lite.scores["overall"]["mean"] - std.scores["overall"]["mean"]
               if lite and std and lite.scores["overall"]["mean"] is not None
               and std.scores["overall"]["mean"] is not None else None)
        gap_text = "–" if gap is None else f"{gap:+.3f}"
        rows.append(f'<tr><td>{esc(agent, 200)}</td>{cells}<td class="n">{gap_text}</td></tr>')
    head = "".join(f'<th class="n">{esc(t)} Overall</th>' for t in tiers)
    chart = _bars([(a, [(t, by[(a, t)].scores["overall"]["mean"]) for t in tiers if (a, t) in by]) for a in agents],
                  {t: TIER_COLOURS[t] for t in tiers}, "Overall per agent, one bar per tier")
    return ("<h1>Lite versus Standard</h1><p>The same data and metric with more or less scaffolding (the paper's "
            "tier analysis): Lite names the model and pins the dependencies, Standard lists candidates.</p>"
            f'<div class="scroll"><table><tr><th>agent</th>{head}<th class="n">Lite − Standard</th></tr>'
            f'{"".join(rows)}</table></div>'
            + _legend([(t, TIER_COLOURS[t]) for t in tiers]) + chart
            + "<h2>Per agent and tier</h2>" + _table(board, ("agent", "tier"), {
                "agent": lambda key: f"runs.html#agent-{_slug(key['agent'])}"}))


def _stages(board: Leaderboard) -> str:
    by_agent = board.analyses["stages"]["by_agent"]
    colours = series_colours(sorted(by_agent))
    groups = [(stage, [(a, by_agent[a]["stages"].get(stage, {}).get("mean")) for a in colours]) for stage in STAGES]
    overall = board.analyses["stages"]["all"]
    rows = "".join(f"<tr><td>{esc(a, 200)}</td>"
                   + "".join(f'<td class="n">{_ci(v["stages"].get(s, {}))}</td>' for s in STAGES)
                   + "".join(f"<td>{esc(', '.join(tied(v, which)))}</td>" for which in ("weakest", "strongest"))
                   + "</tr>"
                   for a, v in sorted(by_agent.items()))
    head = "".join(f'<th class="n">{s} {esc(STAGE_NAMES[s])}</th>' for s in STAGES)
    return (f"<h1>Stage profile</h1><p>Over all runs: <b>{esc(extremes(overall) or '–')}</b> (the paper: S3 "
            f'Validate weakest, S2 Setup strongest).</p>{_legend(list(colours.items()))}'
            + _bars(groups, colours, "Mean stage score per agent (one colour per agent)")
            + f'<div class="scroll"><table><tr><th>agent</th>{head}<th>weakest</th><th>strongest</th></tr>{rows}'
              "</table></div>")


def _codes(board: Leaderboard) -> str:
    codes = board.analyses["codes"]
    cliff = board.analyses["cliff"]
    shares = [(c, [("share of fired codes", codes["shares"].get(c))]) for c in E_CODES]
    def share(code: str) -> str:
        value = codes["shares"][code]
        return "–" if value is None else f"{100 * value:.1f} %"

    rows = "".join(f"<tr><td>{c}</td><td>{esc(codes['names'][c])}</td><td class=\"n\">{codes['counts'][c]}</td>"
                   f'<td class="n">{share(c)}</td></tr>' for c in E_CODES)
    cliff_rows = "".join(f"<tr><td>{esc(k)}</td><td class=\"n\">{_ci(v)}</td><td class=\"n\">{v['n']}</td></tr>"
                         for k, v in cliff.items() if isinstance(v, dict))
    drop = cliff.get("drop_one_vs_none")
    drop_text = "–" if drop is None else f"{100 * drop:.0f} % lower"
    return ("<h1>Error codes</h1>"
            f"<p>{codes['fired_total']} codes fired in {codes['runs_with_codes']} runs (diagnostic only: never part "
            "of a score). The paper: verification (E3) 37.7 % and submission (E5) 38.1 % dominate; task "
            "understanding (E1) 0.9 %.</p>" + _legend([("share of fired codes", SERIES_COLOUR)])
            + _bars(shares, {"share of fired codes": SERIES_COLOUR}, "Share of fired codes per category")
            + f'<div class="scroll"><table><tr><th>code</th><th>category</th><th class="n">fired</th>'
              f'<th class="n">share</th></tr>{rows}</table></div>'
            + "<h2>Overall by number of fired codes</h2><p>The paper: runs with one fired code score 48 % lower "
              f"Overall than runs with none. Here: {drop_text}.</p>"
            + f'<div class="scroll"><table><tr><th>codes fired</th><th class="n">Overall</th><th class="n">runs</th>'
              f"</tr>{cliff_rows}</table></div>")


def _made(attempts: Attempts) -> str:
    """A row's "runs made" cell: "3 of 7", marked "chosen" when the folder holds only some of them, why in its
    title (the ranking is as wide as a laptop's screen; `leaderboard` and `--json` say why in full)."""
    text = attempts.short(mark=False)
    if attempts.chosen:
        return f'<td class="chosen" title="chosen: {esc(attempts.text(), 300)}">{esc(text)} <b>chosen</b></td>'
    return f"<td>{esc(text)}</td>"


def _runs(table: RunTable, pages: dict[int, str], rows: list[int] | None = None, up: str = "",
          title: str = "All runs", heading: str = "h1") -> str:
    """The runs (`rows` of the table, default all), each linked to its page; the first run of each agent carries
    the anchor `agent-<slug>` that table rows link to. `up` leads from a page in a subfolder back to the root."""
    chosen = range(len(table)) if rows is None else rows
    order = sorted(chosen, key=lambda i: (table["agent"][i], table["task_id"][i], table["tier"][i], table["run_id"][i]))
    lines, seen = [], set()
    for i in order:
        agent = table["agent"][i]
        anchor = ""
        if agent not in seen:
            seen.add(agent)
            anchor = f' id="agent-{_slug(agent)}"'
        run_id = table["run_id"][i]
        link = (f'<a href="{up}{pages[i]}">{esc(run_id, 120)}</a>' if i in pages else esc(run_id, 120))
        overall = table["overall"][i]
        task_id = table["task_id"][i]
        lines.append(f'<tr{anchor}><td class="key">{link}</td><td>{esc(agent, 200)}</td>'
                     f'<td><a href="{up}{_task_page(task_id)}">{esc(task_id, 200)}</a></td>'
                     f"<td>{esc(table['tier'][i])}</td><td>{esc(table['state'][i])}</td>"
                     f'<td class="n">{num(None if overall != overall else float(overall))}</td>'
                     f'<td><span class="badge {esc(table["rating"][i], 2)}">{esc(table["rating"][i], 2)}</span></td>'
                     f'<td class="n">{int(table["turns"][i]) if table["turns"][i] == table["turns"][i] else "–"}</td>'
                     f"<td>{esc(', '.join(table['codes'][i]))}</td></tr>")
    missing = sum(1 for i in chosen if i not in pages)
    note = f'<p class="note">{missing} runs have no page here (over {MAX_RUN_PAGES}).</p>' if missing > 0 else ""
    return (f"<{heading}>{esc(title)}</{heading}>" + note + '<div class="scroll"><table><tr><th>run</th><th>agent</th>'
            '<th>task</th><th>tier</th><th>state</th><th class="n">Overall</th><th>rating</th><th class="n">turns</th>'
            f"<th>codes</th></tr>{''.join(lines)}</table></div>")


def _track_page(track: str) -> str:
    return f"track/{_slug(track)}.html"


def _task_page(task_id: str) -> str:
    return f"task/{_slug(task_id)}.html"


def _subset(table: RunTable, key: str, value: str, resamples: int,
            seed: int) -> tuple[list[int], RunTable, Leaderboard]:
    """The rows whose `key` is `value` (indices into `table`, for the run links), them as a table, and their
    cells per agent and tier."""
    rows = [i for i in range(len(table)) if table[key][i] == value]
    mask = np.zeros(len(table), dtype=bool)
    mask[rows] = True
    sub = table.select(mask)
    return rows, sub, build(sub, by=("agent", "tier"), resamples=resamples, seed=seed, include_unverified=True)


def _track(table: RunTable, track: str, pages: dict[int, str], resamples: int, seed: int) -> str:
    """One track: its agents per tier, its tasks (each linked to its page), its stage chart and its runs."""
    rows, sub, board = _subset(table, "track", track, resamples, seed)
    tasks = build(sub, by=("task_id",), resamples=resamples, seed=seed, include_unverified=True)
    by_agent = board.analyses["stages"]["by_agent"]  # an agent's runs of other conditions apart (agent_labels)
    colours = series_colours(sorted(by_agent))
    chart = _bars([(stage, [(a, by_agent[a]["stages"].get(stage, {}).get("mean")) for a in colours])
                   for stage in STAGES], colours, f"Mean stage score per agent on the {track} track")
    ran = {str(sub["task_id"][i]) for i in range(len(sub))}
    # distinct tasks: the Tasks table's rows are tasks by conditions (two trajectories of one task are two rows)
    return (f"<h1>Track {esc(track, 200)}</h1><p>{len(rows)} run(s) on {len(ran)} task(s).</p>"
            + _measures(track, ran) + best_runs(table, pages, rows, up="../") + _reproduce(table, rows)
            + "<h2>Per agent and tier</h2>"
            + _table(board, ("agent", "tier"), {"agent": lambda key: f"#agent-{_slug(key['agent'])}"})
            + "<h2>Tasks</h2>"
            + _table(tasks, ("task_id",), {"task_id": lambda key: "../" + _task_page(key["task_id"])})
            + _legend(list(colours.items())) + f'<div class="charts">{chart}</div>'
            + _runs(table, pages, rows, up="../", title=f"Runs on {track}", heading="h2"))


MAX_MEASURED_TASKS = 60  # tasks listed under "what it measures" on a track's page
MAX_COMMANDS = 20  # distinct command lines listed under "how to reproduce" on a track's or a task's page


def _reproduce(table: RunTable, rows: list[int]) -> str:
    """The command lines that made these runs, each once (a track's or task's page gave scores with no word of how
    to make another run like them); runs written before their options were kept are counted, not guessed."""
    commands = list(dict.fromkeys(table["command"][i] for i in rows if table["command"][i]))
    unknown = sum(1 for i in rows if not table["command"][i])
    if not commands and not unknown:
        return ""
    shown = "".join(f"<li><code>{esc(c, 2000)}</code></li>" for c in commands[:MAX_COMMANDS])
    more = f"<li>and {len(commands) - MAX_COMMANDS} more (each run's page gives its own)</li>" \
        if len(commands) > MAX_COMMANDS else ""
    note = (f'<p class="note">{unknown} run(s) were written before a result kept its options: their command is not '
            "known.</p>") if unknown else ""
    return ('<h2 id="reproduce">How to reproduce</h2><p>Each command makes a run like these, with the data staged '
            "under the data root (a demo generates its own; a release task needs <code>automedbench stage TASK "
            "--from PATH</code> first; <code>--out</code> and <code>--data-root</code> are yours):</p>"
            f'<ul class="commands">{shown}{more}</ul>{note}')


def _measures(track: str, ran: set[str]) -> str:
    """What the track measures: the stages every run is graded on, then each task's title and metric from the
    installed track (a task with runs here linked to its page); a track's page gave numbers only, with no word of
    what they score."""
    described = track_description(track)
    intro = (f"<p>{esc(described, 400)}.</p>" if described else "") + (
        "<p>Every run is graded on the five stages of its work (S1 Plan, S2 Setup, S3 Validate, S4 Inference, "
        "S5 Submit: Agentic) and on its task's metric over the held-out cases (Task); Overall is "
        "0.5 Agentic + 0.5 Task.</p>")
    try:
        specs = registry().track(track).tasks()
    except Exception:  # not installed here (a site built from another machine's runs): the runs still say it
        return (intro + f'<p class="note">The {esc(track, 200)} track is not installed here: each run\'s page '
                "names its task's metric.</p>")
    items = []
    for spec in sorted(specs, key=lambda t: (t.id not in ran, t.id))[:MAX_MEASURED_TASKS]:
        name = (f'<a href="../{_task_page(spec.id)}">{esc(spec.id, 200)}</a>' if spec.id in ran
                else esc(spec.id, 200))
        items.append(f"<li>{name}: {esc(spec.title, 300)}; metric: {esc(spec.metric, MAX_METRIC_WORDS)}; "
                     f"{rating_bands(spec)}</li>")
    return f'<h2 id="measures">What it measures</h2>{intro}<ul class="measures">{"".join(items)}</ul>'


MAX_METRIC_WORDS = 2000  # a task file's metric in words: report generation's demo runs past 400 characters


def _task_measures(track: str, task_id: str) -> str:
    """What one task measures, from the installed track: its title and its metric in words (a task's page gave
    a Task column and a chart with no word of what the Task scores; its track's page said it, one click away)."""
    try:
        spec = registry().track(track).task(task_id)
    except Exception:  # not installed here, or a task this version does not define: each run's page names it
        return (f'<h2 id="measures">What it measures</h2><p class="note">{esc(task_id, 200)} is not defined by a '
                "track installed here: each run's page names its task's metric.</p>")
    return (f'<h2 id="measures">What it measures</h2><p>{esc(spec.title, 300)}. Task: '
            f"{esc(spec.metric, MAX_METRIC_WORDS)}; each run is also graded on the five stages of its work (S1 Plan, "
            f"S2 Setup, S3 Validate, S4 Inference, S5 Submit: Agentic); Overall is 0.5 Agentic + 0.5 Task; "
            f"{rating_bands(spec)}.</p>" + task_data(spec))


def _task(table: RunTable, task_id: str, pages: dict[int, str], resamples: int, seed: int, picture: str = "") -> str:
    """One task: what it measures, what it looks like (`picture`), its agents per tier, Overall per agent and tier
    as a chart, and its runs."""
    rows, sub, board = _subset(table, "task_id", task_id, resamples, seed)
    track = sub["track"][0] if len(sub) else ""
    tiers = [t for t in ("lite", "standard", "pro") if any(c.key["tier"] == t for c in board.cells)]
    agents = sorted({_who(c) for c in board.cells})
    by = {(_who(c), c.key["tier"]): c for c in board.cells}
    chart = _bars([(a, [(t, by[(a, t)].scores["overall"]["mean"]) for t in tiers if (a, t) in by]) for a in agents],
                  {t: TIER_COLOURS[t] for t in tiers}, f"Overall per agent on {task_id}, one bar per tier")
    return (f'<h1>Task {esc(task_id, 200)}</h1><p>Track <a href="../{_track_page(track)}">{esc(track, 200)}</a>; '
            f"{len(rows)} run(s).</p>" + _task_measures(track, task_id) + picture
            + _table(board, ("agent", "tier"), {"agent": lambda key: f"#agent-{_slug(key['agent'])}"})
            + _legend([(t, TIER_COLOURS[t]) for t in tiers]) + f'<div class="charts">{chart}</div>'
            + _reproduce(table, rows) + _runs(table, pages, rows, up="../", title=f"Runs on {task_id}", heading="h2"))


def _verified_page(path: Path, pictures: bool, samples: BestSamples, table: RunTable, row: int) -> str | None:
    """A counted run's page, rendered from a private copy checked against its proof (`copy_verified`); None when
    the folder no longer holds what the harness signed. The table was checked when it was loaded: rendering the
    folder itself showed whatever another user put there since (a forged result.json or trajectory on the page
    of a run the ranking counts)."""
    with tempfile.TemporaryDirectory(prefix="automedbench-site-") as private:
        copy = copy_verified(RunFolder(path), Path(private))
        if isinstance(copy, str):
            return None
        try:
            page = render_run(copy[0], back="../runs.html", pictures=pictures)
            if pictures:  # the task page's picture, from the same verified copy
                samples.offer(table, row, copy[0])
            return page
        except (OSError, ValueError):
            return None


def write_site(table: RunTable, out: Path, *, resamples: int = 2000, seed: int = 0,
               pictures: bool = True) -> list[Path]:
    """Write the site into `out` (created if need be); returns the pages written. Every run in `table` counts:
    the caller has already left unverified runs out unless asked (`leaderboard --include-unverified`);
    `pictures=False` leaves the case pictures (drawn from the data) out of every run page."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "runs").mkdir(exist_ok=True)
    previous = previous_pages(out)  # the last build's pages: those not written again are removed at the end
    pages: dict[int, str] = {}  # row of the table -> its page: run ids repeat across sweep folders
    taken: set[str] = set()
    samples = BestSamples({})
    written = []
    for i in range(min(len(table), MAX_RUN_PAGES)):
        run_id, path = table["run_id"][i], table["path"][i]
        name = run_page_name(run_id, taken, path)
        text = _verified_page(Path(path), pictures, samples, table, i)
        if text is None:
            continue
        # a run page sits one folder down: its own links are in-page anchors only
        atomic_write_text(out / name, text, shared=True)
        pages[i] = name
        taken.add(name.lower())
        written.append(out / name)
    board = build(table, by=("agent", "task_id", "tier"), resamples=resamples, seed=seed, include_unverified=True)
    tracks = build(table, by=("track", "agent"), resamples=resamples, seed=seed, include_unverified=True)
    content = {
        "index.html": _ranking(table, resamples, seed),
        "tracks.html": "<h1>Per track</h1>" + _table(tracks, ("track", "agent"), {
            "track": lambda key: _track_page(key["track"]),
            "agent": lambda key: f"{_track_page(key['track'])}#agent-{_slug(key['agent'])}"})
        + tracks_measured({str(t) for t in table["track"]}, _track_page),
        "tasks.html": "<h1>Per task</h1>" + _table(board, ("task_id", "tier", "agent"), {
            "task_id": lambda key: _task_page(key["task_id"]),
            "agent": lambda key: f"{_task_page(key['task_id'])}#agent-{_slug(key['agent'])}"}),
        "tiers.html": _tiers(table, resamples, seed),
        "stages.html": _stages(board),
        "codes.html": _codes(board),
        "runs.html": _runs(table, pages),
    }
    for name, body in content.items():
        title = dict(PAGES)[name]
        atomic_write_text(out / name, document(f"AutoMedBench · {title}", SITE_CSS + body, _nav(name)), shared=True)
        written.append(out / name)

    def task_page(t: RunTable, name: str, p: dict[int, str], r: int, s: int) -> str:
        return _task(t, name, p, r, s, picture=samples.section(t, name, p, pictures))

    for folder, names, render in (("track", sorted(set(table["track"])), _track),
                                  ("task", sorted(set(table["task_id"])), task_page)):
        (out / folder).mkdir(exist_ok=True)
        for name in names:
            path = out / (_track_page(name) if folder == "track" else _task_page(name))
            body = render(table, name, pages, resamples, seed)
            atomic_write_text(path, document(f"AutoMedBench · {folder} {name}", SITE_CSS + body, _nav("", "../")),
                              shared=True)
            written.append(path)
    record_pages(out, written, previous)
    return written
