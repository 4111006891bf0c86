"""A static, self-contained HTML report: the leaderboard table and inline SVG plots drawn here.

No JavaScript and no external assets, so the file renders the same offline, in a browser or a CI
screenshot. Plots: mean per stage with CIs (per agent), share of fired codes, Overall distributions,
Overall by number of fired codes.
"""

from __future__ import annotations

import html
from datetime import datetime, timezone
from typing import Any

import numpy as np
from automedbench.api import STAGE_NAMES, STAGES

from .colours import PALETTE, series_colours
from .leaderboard import (
    RATINGS,
    Leaderboard,
    chosen_words,
    conditions_words,
    judges_words,
    not_counted_words,
    run_labels,
)
from .render import LABELS, pct
from .store import FINISHED, RunTable

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;background:#fff}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}
table{border-collapse:collapse;font-size:12px}th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}
th{background:#eef2f8}td.k{text-align:left}.plots{display:flex;flex-wrap:wrap;gap:24px}
figure{margin:0}figcaption{font-size:12px;color:#555;max-width:520px}.note{color:#555;font-size:12px}
.scroll{overflow-x:auto;max-width:100%}td small{display:block;color:#666;white-space:nowrap}
"""
CHAR_PX = 6.6  # average width of an 11 px sans-serif character: room for labels is reserved from it


def _e(text: Any) -> str:
    return html.escape(str(text))


def _svg(width: int, height: int, body: list[str], title: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{_e(title)}" font-size="11" '
            f'font-family="sans-serif"><rect width="100%" height="100%" fill="#fff"/>' + "".join(body) + "</svg>")


def _axis(x0: int, y0: int, w: int, h: int, top: float = 1.0, ticks: int = 5, fmt=lambda v: f"{v:.0f}") -> list[str]:
    out = [f'<line x1="{x0}" y1="{y0}" x2="{x0 + w}" y2="{y0}" stroke="#333"/>',
           f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y0 - h}" stroke="#333"/>']
    for i in range(ticks + 1):
        v = top * i / ticks
        y = y0 - h * i / ticks
        out.append(f'<line x1="{x0 - 4}" y1="{y:.1f}" x2="{x0 + w}" y2="{y:.1f}" stroke="#eee"/>')
        out.append(f'<text x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end">{_e(fmt(v))}</text>')
    return out


def stage_plot(board: Leaderboard) -> str:
    by_agent = board.analyses["stages"]["by_agent"]
    agents = list(by_agent) or ["all"]
    series = by_agent or {"all": board.analyses["stages"]["all"]}
    colours = series_colours(agents)  # one each: the palette repeated from the 11th agent, two read as one
    w, h, x0, y0 = 560, 300, 44, 250
    plot_w, plot_h = w - x0 - 16, 200
    body = _axis(x0, y0, plot_w, plot_h, 1.0, fmt=lambda v: f"{v:.1f}")
    group = plot_w / len(STAGES)
    bar = max(3.0, (group - 12) / len(agents))
    for si, stage in enumerate(STAGES):
        gx = x0 + si * group + 6
        for ai, agent in enumerate(agents):
            v = series[agent]["stages"].get(stage, {})
            if not v or v.get("mean") is None:
                continue
            x = gx + ai * bar
            top = y0 - plot_h * v["mean"]
            tip = f"<title>{_e(agent)} {stage}: {pct(v['mean'])}</title>"
            body.append(f'<rect x="{x:.1f}" y="{top:.1f}" width="{bar - 1:.1f}" height="{y0 - top:.1f}" '
                        f'fill="{colours[agent]}">{tip}</rect>')
            if v.get("lo") is not None:
                cx = x + (bar - 1) / 2
                body.append(f'<line x1="{cx:.1f}" y1="{y0 - plot_h * v["lo"]:.1f}" x2="{cx:.1f}" '
                            f'y2="{y0 - plot_h * v["hi"]:.1f}" stroke="#111"/>')
        body.append(f'<text x="{gx + group / 2 - 6:.1f}" y="{y0 + 16}" text-anchor="middle">{stage} '
                    f'{_e(STAGE_NAMES[stage])}</text>')
    lx, ly = x0 + 8, 14
    for agent in agents:
        name = agent if len(agent) <= 28 else agent[:27] + "…"
        span = 24 + CHAR_PX * len(name)
        if lx + span > w and lx > x0 + 8:  # next legend row rather than past the edge
            lx, ly = x0 + 8, ly + 14
        body.append(f'<rect x="{lx:.1f}" y="{ly - 9}" width="10" height="10" fill="{colours[agent]}"/>'
                    f'<text x="{lx + 14:.1f}" y="{ly}">{_e(name)}</text>')
        lx += span
    return _svg(w, h + 10, body, "mean score per stage")


def code_plot(board: Leaderboard) -> str:
    """One bar per code; the label column and the room after the longest bar are sized from the text."""
    codes = board.analyses["codes"]
    row = 28
    labels = {code: f"{code} {codes['names'][code]}" for code in codes["shares"]}
    values = {code: f"{100 * (share or 0.0):.1f} % ({codes['counts'][code]})"
              for code, share in codes["shares"].items()}
    bar_x = 12 + CHAR_PX * max([len(t) for t in labels.values()] + [4])
    room = 10 + CHAR_PX * max([len(t) for t in values.values()] + [4])
    bar_w = 280
    w = int(bar_x + bar_w + room)
    body = []
    for i, (code, share) in enumerate(codes["shares"].items()):
        y = 10 + i * row
        value = share or 0.0
        body.append(f'<text x="4" y="{y + 14}">{_e(labels[code])}</text>')
        body.append(f'<rect x="{bar_x:.1f}" y="{y}" width="{bar_w * value:.1f}" height="18" '
                    f'fill="{PALETTE[i % len(PALETTE)]}"/>')
        body.append(f'<text x="{bar_x + 6 + bar_w * value:.1f}" y="{y + 14}">{_e(values[code])}</text>')
    return _svg(w, 10 + row * len(codes["shares"]) + 8, body, "share of fired error codes")


def _nice_step(peak: int, ticks: int = 4) -> int:
    """A whole-number tick step (1, 2, 5, 10, 20, ...) giving at most `ticks` steps up to `peak`."""
    step = 1
    while peak / step > ticks:
        for factor in (2, 2.5, 2):
            step = int(step * factor)
            if peak / step <= ticks:
                break
    return step


def distribution_plot(table: RunTable, include_unverified: bool = False) -> str:
    """Per row of the ranking by agent (an agent's runs of other conditions apart, as its rows and stage profile
    keep them; `evaluate` results are no agent's): a histogram of Overall (10 bins, x = Overall 0–1) with a
    run-count axis. Per agent name, it pooled a run re-graded by a lenient judge with the runs graded as made."""
    labels = run_labels(table, include_unverified=include_unverified)
    agents = sorted({label for label in labels if label is not None})
    colours = series_colours(agents)
    bins = np.linspace(0, 1, 11)
    cols = 3
    cw, ch = 250, 190
    rows = max(1, (len(agents) + cols - 1) // cols)
    body = []
    for ai, agent in enumerate(agents):
        ox, oy = (ai % cols) * cw, (ai // cols) * ch
        values = table["overall"][np.array([label == agent for label in labels], dtype=bool)]
        values = values[~np.isnan(values)]
        counts, _ = np.histogram(values, bins=bins)
        step = _nice_step(max(1, int(counts.max()) if counts.size else 1))
        top = step * -(-max(1, int(counts.max()) if counts.size else 1) // step)  # rounded up to a whole step
        x0, y0, pw, ph = ox + 44, oy + ch - 40, cw - 60, ch - 74
        name = agent if len(agent) <= 28 else agent[:27] + "…"
        body.append(f'<text x="{x0}" y="{oy + 16}" font-weight="bold">{_e(name)} (n={values.size})</text>')
        body.append(f'<line x1="{x0}" y1="{y0}" x2="{x0 + pw}" y2="{y0}" stroke="#333"/>'
                    f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y0 - ph}" stroke="#333"/>')
        for tick in range(0, top + 1, step):
            y = y0 - ph * tick / top
            body.append(f'<line x1="{x0 - 4}" y1="{y:.1f}" x2="{x0 + pw}" y2="{y:.1f}" stroke="#eee"/>'
                        f'<text x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end">{tick}</text>')
        for bi, count in enumerate(counts):
            bh = ph * count / top
            body.append(f'<rect x="{x0 + bi * pw / 10:.1f}" y="{y0 - bh:.1f}" width="{pw / 10 - 1:.1f}" '
                        f'height="{bh:.1f}" fill="{colours[agent]}"><title>{_e(agent)}: {count} '
                        f'run(s) with Overall {bi / 10:.1f}–{(bi + 1) / 10:.1f}</title></rect>')
        for tick in range(0, 11, 2):
            x = x0 + pw * tick / 10
            body.append(f'<line x1="{x:.1f}" y1="{y0}" x2="{x:.1f}" y2="{y0 + 4}" stroke="#333"/>'
                        f'<text x="{x:.1f}" y="{y0 + 16}" text-anchor="middle">{tick / 10:.1f}</text>')
        body.append(f'<text x="{x0 + pw / 2:.1f}" y="{y0 + 30}" text-anchor="middle" fill="#555">Overall</text>')
        body.append(f'<text x="{ox + 12}" y="{y0 - ph / 2:.1f}" text-anchor="middle" fill="#555" '
                    f'transform="rotate(-90 {ox + 12} {y0 - ph / 2:.1f})">runs</text>')
    return _svg(cols * cw, rows * ch, body, "Overall score distribution per agent")


def cliff_plot(board: Leaderboard) -> str:
    cliff = board.analyses["cliff"]
    w, h, x0, y0 = 300, 240, 44, 200
    plot_h = 170
    body = _axis(x0, y0, 240, plot_h, 1.0, fmt=lambda v: f"{v:.1f}")
    for i, name in enumerate(("0", "1", "2+")):
        v = cliff[name]
        x = x0 + 20 + i * 75
        if v["mean"] is not None:
            top = y0 - plot_h * v["mean"]
            body.append(f'<rect x="{x}" y="{top:.1f}" width="50" height="{y0 - top:.1f}" fill="{PALETTE[i]}"/>')
            if v["lo"] is not None:
                body.append(f'<line x1="{x + 25}" y1="{y0 - plot_h * v["lo"]:.1f}" x2="{x + 25}" '
                            f'y2="{y0 - plot_h * v["hi"]:.1f}" stroke="#111"/>')
        body.append(f'<text x="{x + 25}" y="{y0 + 16}" text-anchor="middle">{name} code(s)</text>'
                    f'<text x="{x + 25}" y="{y0 + 30}" text-anchor="middle" fill="#555">n={v["n"]}</text>')
    return _svg(w, h, body, "Overall by number of fired codes")


def _table(board: Leaderboard) -> str:
    head = [LABELS[k] for k in board.by] + ["n", "Overall", "Agentic", "Task", *STAGES,
                                            "A/B/C/F", "Turns", "Wall s", "Tokens", "Cost $", "Runs made"]
    rows = []
    for cell in sorted(board.cells, key=lambda c: -(c.scores["overall"]["mean"] or -1)):
        keys = "".join(f'<td class="k">{_e(cell.key[k])}</td>' for k in board.by)
        scores = [_score_cell(cell.scores[m]) for m in ("overall", "agentic", "task", *STAGES)]
        rest = ["/".join(str(cell.ratings.get(r, 0)) for r in RATINGS), f"{cell.turns:.1f}", f"{cell.wall_s:.1f}",
                f"{cell.tokens:,.0f}", f"{cell.cost_usd:.2f}", cell.attempts.short()]
        rows.append("<tr>" + keys + f"<td>{cell.n}</td>" + "".join(f"<td>{v}</td>" for v in scores) +
                    "".join(f"<td>{_e(v)}</td>" for v in rest) + "</tr>")
    return ('<div class="scroll"><table id="leaderboard"><thead><tr>' + "".join(f"<th>{_e(h)}</th>" for h in head) +
            "</tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>")


MAX_REFUSED_SHOWN = 20  # results not counted named one by one; the rest counted (all are in --json)


def _caveats(board: Leaderboard) -> str:
    """What the terminal says under its table: rows of chosen runs, the conditions in words, what was not counted and
    why. The report had none of it, so a best-of-three copied alone read as a plain n 1 row ("1 of 3" in the
    terminal, --json and --site)."""
    lines = [f"Chosen runs {chosen_words(board, cell)}" for cell in board.cells if cell.attempts.chosen]
    if board.conditions:
        lines.append(f"Conditions (rows of other options are never pooled): {conditions_words(board)}")
    if not_counted := not_counted_words(board):
        lines.append(not_counted)
    lines += [f"Not counted {why}" for why in board.rejected[:MAX_REFUSED_SHOWN]]
    if len(board.rejected) > MAX_REFUSED_SHOWN:
        lines.append(f"Not counted: {len(board.rejected) - MAX_REFUSED_SHOWN} more (see --json)")
    return f'<ul class="note" id="caveats">{"".join(f"<li>{_e(line)}</li>" for line in lines)}</ul>' if lines else ""


def _score_cell(score: dict[str, Any]) -> str:
    """Mean (0–1, cut to 3 places), and under it the 95 % CI only where there are two or more runs to resample (a single
    run's "CI" is the value itself)."""
    if score["mean"] is None:
        return "–"
    if (score.get("n") or 0) < 2 or score.get("lo") is None:
        return _e(pct(score["mean"]))
    return f'{_e(pct(score["mean"]))}<small>{_e(pct(score["lo"]))}–{_e(pct(score["hi"]))}</small>'


def render_html(board: Leaderboard, table: RunTable, title: str = "AutoMedBench leaderboard") -> str:
    table = table.select(np.array([s in FINISHED for s in table["state"]], dtype=bool))
    a = board.analyses
    st = a["stages"]["all"]
    codes = a["codes"]
    cliff = a["cliff"]
    findings = []
    if st["weakest"]:
        def named(which: str) -> str:  # every stage of a tie, not its first alone
            found = st.get(f"{which}_all") or [st[which]]
            return ", ".join(f"{s} {STAGE_NAMES[s]}" for s in found) + f" ({pct(st['stages'][found[0]]['mean'])})"

        findings.append(f"Every stage scored the same ({pct(st['stages'][st['weakest']]['mean'])})."
                        if st.get("weakest_all") and st.get("weakest_all") == st.get("strongest_all")
                        else f"Weakest stage: {named('weakest')}; strongest: {named('strongest')}.")
    if codes["fired_total"]:
        ratio = codes["engineering_to_knowledge"]
        tail = f"engineering : knowledge = {ratio} : 1." if ratio is not None else "no E1 (knowledge) code fired."
        findings.append(f"{codes['fired_total']} fired error codes in {codes['runs_with_codes']} runs; {tail}")
    if cliff["drop_one_vs_none"] is not None:
        findings.append(f"Runs with one fired code score {100 * cliff['drop_one_vs_none']:.0f} % lower Overall "
                        "than runs with none.")
    if a["turns_per_run"] is not None:
        findings.append(f"Turns per run: {a['turns_per_run']:.1f}.")
    if graders := judges_words(board):
        findings.append(graders + ".")
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    # the caller left unverified runs out of `table` unless the board counts them (as the site's caller does)
    runs_plot = distribution_plot(table, include_unverified=True)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title><style>{CSS}</style></head>
<body>
<h1>{_e(title)}</h1>
<p class="note">{board.runs_used} finished run(s) of {board.runs_total}; scores 0–1 (cut to 3 places) with 95 %
percentile bootstrap CIs ({board.resamples} resamples, seed {board.seed}). Generated {stamp}.</p>
<ul id="findings">{"".join(f"<li>{_e(f)}</li>" for f in findings)}</ul>
<h2>Leaderboard</h2>
{_table(board)}
{_caveats(board)}
<h2>Analyses</h2>
<div class="plots">
<figure>{stage_plot(board)}<figcaption>Mean score per stage per agent, with 95 % CIs.</figcaption></figure>
<figure>{code_plot(board)}<figcaption>Share of all fired error codes (E1–E5; breaches are not codes).
</figcaption></figure>
<figure>{cliff_plot(board)}<figcaption>Overall by number of fired codes, with 95 % CIs.</figcaption></figure>
<figure>{runs_plot}<figcaption>Overall score distribution per agent (10 bins).</figcaption></figure>
</div>
</body></html>
"""
