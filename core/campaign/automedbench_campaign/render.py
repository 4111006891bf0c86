"""Leaderboard output for the terminal (rich) and as CSV."""

from __future__ import annotations

import csv
import io
from typing import Any

from automedbench.api import STAGES
from automedbench.engine import csv_cell
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .leaderboard import (
    RATINGS,
    Leaderboard,
    chosen_words,
    conditions_words,
    extremes,
    flat_rows,
    judges_words,
    not_counted_words,
    null_overall_runs,
)
from .viewer.page import num

LABELS = {"agent": "Agent", "task_id": "Task", "track": "Track", "tier": "Tier", "conditions": "Conditions"}


def pct(value: float | None) -> str:
    """A score as everywhere else (`run`, `show`, result.json, the site): 0–1, cut to 3 places."""
    return num(value)


def with_ci(score: dict[str, Any]) -> str:
    if score["mean"] is None:
        return "–"
    return f"{pct(score['mean'])} [{pct(score['lo'])}–{pct(score['hi'])}]"


def stacked_ci(score: dict[str, Any]) -> str:
    """The mean over its CI on a second line: keeps the table narrow enough for a terminal."""
    if score["mean"] is None:
        return "–"
    return f"{pct(score['mean'])}\n[dim]{pct(score['lo'])}–{pct(score['hi'])}[/]"


def _keyed_table(board: Leaderboard, title: str) -> Table:
    table = Table(title=title, header_style="bold", show_lines=True)
    for key in board.by:  # names may fold, never to a few letters per line while numbers have room
        table.add_column(LABELS[key], overflow="fold", min_width=min(24, max([len(LABELS[key]), *(
            len(c.key[key]) for c in board.cells)])))  # a board of no cells (every result refused) too
    table.add_column("n", justify="right", no_wrap=True)
    return table


def render_terminal(board: Leaderboard, console: Console) -> None:
    cells = sorted(board.cells, key=lambda c: -(c.scores["overall"]["mean"] or -1))
    scores = _keyed_table(board, f"Leaderboard: {board.runs_used} finished run(s), scores 0–1, "
                                 "mean over its 95 % bootstrap CI")
    effort = _keyed_table(board, "Ratings (run counts) and effort (means per run)")
    for name in ("Overall", "Agentic", "Task", *STAGES):
        scores.add_column(name, justify="right", no_wrap=True)
    for name in ("A/B/C/F", "Turns", "Wall s", "Tokens", "Cost $", "Runs made"):
        effort.add_column(name, justify="right", no_wrap=True)
    for cell in cells:
        keys = [escape(cell.key[k]) for k in board.by]
        scores.add_row(*keys, str(cell.n), *[stacked_ci(cell.scores[m]) for m in ("overall", "agentic", "task")],
                       *[pct(cell.scores[s]["mean"]) for s in STAGES])
        effort.add_row(*keys, str(cell.n), "/".join(str(cell.ratings.get(r, 0)) for r in RATINGS),
                       f"{cell.turns:.1f}", f"{cell.wall_s:.1f}", f"{cell.tokens:,.0f}", f"{cell.cost_usd:.2f}",
                       cell.attempts.short())
    console.print(scores)
    console.print(effort)
    for cell in cells:  # a row of runs chosen among attempts: said in full, never only as a mark in a column
        if cell.attempts.chosen:
            console.print(f"[yellow]chosen runs[/] {escape(chosen_words(board, cell))}", soft_wrap=True)
    if board.conditions:  # the digest a row shows, in words
        console.print(escape(f"Conditions (rows of other options are never pooled): {conditions_words(board)}"),
                      soft_wrap=True)
    a = board.analyses
    stages = a["stages"]["all"]
    if stages["stages"]:
        parts = ", ".join(f"{s} {pct(v['mean'])}" for s, v in stages["stages"].items())
        console.print(f"Mean per stage: {parts}; {extremes(stages)}")
    codes = a["codes"]
    if codes["fired_total"]:
        shares = ", ".join(f"{c} {100 * s:.1f} %" for c, s in codes["shares"].items() if s is not None)
        ratio = codes["engineering_to_knowledge"]
        tail = f"engineering : knowledge = {ratio} : 1" if ratio is not None else "no E1 (knowledge) code fired"
        console.print(f"Fired codes: {codes['fired_total']} in {codes['runs_with_codes']} run(s); {shares}; {tail}")
    cliff = a["cliff"]
    if cliff["0"]["n"] and cliff["with"]["n"]:
        drop = cliff["drop_one_vs_none"]
        console.print(f"Overall without codes {pct(cliff['0']['mean'])} (n={cliff['0']['n']}), one code "
                      f"{pct(cliff['1']['mean'])} (n={cliff['1']['n']}), two or more {pct(cliff['2+']['mean'])} "
                      f"(n={cliff['2+']['n']})" + (f"; one code costs {100 * drop:.0f} %" if drop is not None else ""))
    if a["turns_per_run"] is not None:
        console.print(f"Turns per run: {a['turns_per_run']:.1f}")
    if graders := judges_words(board):
        console.print(escape(graders), style="yellow" if len(a.get("judges") or {}) > 1 else None, soft_wrap=True)
    nulls = null_overall_runs(board)
    if nulls:
        console.print(f"[yellow]{nulls} counted run(s) have no Overall[/] (no judge verdict, or no Task): their "
                      "cells' Overall and Agentic are means over the other runs (`<metric>_n` in the CSV/JSON says "
                      "how many); `automedbench rejudge` fills a missing verdict")
    if board.excluded:
        console.print(escape(not_counted_words(board)))
    for problem in board.skipped[:5]:
        console.print(f"[yellow]skipped[/] {escape(str(problem))}")
    for problem in board.rejected[:20]:
        console.print(f"[red]not counted[/] {escape(str(problem))}", soft_wrap=True)
    if len(board.rejected) > 20:
        console.print(f"[red]not counted[/] {len(board.rejected) - 20} more (see --json)")


def to_csv(board: Leaderboard) -> str:
    rows = flat_rows(board)
    buffer = io.StringIO()
    if rows:
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: csv_cell(v) for k, v in row.items()} for row in rows)  # no formula from agent text
    return buffer.getvalue()
