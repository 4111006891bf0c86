"""The site's per-tier tables and charts when a leaderboard splits an agent's runs by their conditions.

Before: the Lite-vs-Standard page and each task page keyed their cells by (agent, tier) alone, so of two
conditions of one agent (a strict and a `--task-score partial` run) one silently replaced the other in the
table and the chart, and the ranking drew two bars with one label."""

from __future__ import annotations

import re

from automedbench_campaign.leaderboard import build
from automedbench_campaign.site import write_site
from automedbench_campaign.store import RunTable


def _row(agent: str, condition: str, score: float, tier: str = "lite") -> dict:
    return {"run_id": f"{agent}-{condition}-{tier}", "agent": agent, "task_id": "toy/vowels", "track": "toy",
            "tier": tier, "conditions": condition, "state": "scored", "end_reason": "", "rating": "C", "path": "",
            "overall": score, "agentic": score, "task": score, **{s: score for s in ("S1", "S2", "S3", "S4", "S5")},
            "turns": 1, "wall_s": 1.0, "tokens_in": 0, "tokens_out": 0, "cost_usd": 0.0, "judge_cost_usd": 0.0,
            "codes": [], "breached": False, "submitted": True}


def _cells(html: str, label: str) -> list[str]:
    """The table rows of `html` whose first cell is `label`, as their cells' text."""
    found = []
    for row in re.findall(r"<tr>(.*?)</tr>", html, flags=re.S):
        cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S)]
        if cells and cells[0] == label:
            found.append(cells)
    return found


def test_two_conditions_of_one_agent_are_two_rows_and_two_bars_on_every_page(tmp_path):
    table = RunTable.from_rows([_row("a", "strictcondit", 0.125), _row("a", "partialcondi", 0.875),
                                _row("a", "strictcondit", 0.25, tier="standard"), _row("b", "strictcondit", 0.5)])
    assert build(table, resamples=20).by[-1] == "conditions"
    pages = write_site(table, tmp_path, resamples=20, pictures=False)
    assert pages
    tiers = (tmp_path / "tiers.html").read_text()
    strict, partial = _cells(tiers, "a [strictcondit]"), _cells(tiers, "a [partialcondi]")
    assert len(strict) == 1 and len(partial) == 1, (strict, partial)
    assert strict[0][1].startswith("0.125") and strict[0][2].startswith("0.250") and strict[0][3] == "-0.125"
    assert partial[0][1].startswith("0.875") and partial[0][2] == "–"
    task = next((tmp_path / "task").glob("*.html")).read_text()
    for page in (tiers, task):
        # one bar per (agent and conditions, tier), each titled with its own mean
        assert "a [strictcondit] · " not in page  # series are tiers there; groups are labelled below the bars
        assert re.search(r"lite · a \[strictcondit\]: 0\.125", page) and re.search(
            r"lite · a \[partialcondi\]: 0\.875", page), page[:200]
    ranking = (tmp_path / "index.html").read_text()
    assert re.search(r"a \[strictcondit\] · Overall: ", ranking) and re.search(r"a \[partialcondi\] · Overall: ",
                                                                               ranking)


def test_one_condition_keeps_plain_agent_labels(tmp_path):
    table = RunTable.from_rows([_row("a", "same", 0.5), _row("a", "same", 0.25, tier="standard")])
    write_site(table, tmp_path, resamples=20, pictures=False)
    tiers = (tmp_path / "tiers.html").read_text()
    summary = [cells for cells in _cells(tiers, "a") if len(cells) == 4]  # agent, Lite, Standard, Lite - Standard
    assert len(summary) == 1 and summary[0][3] == "+0.250" and "[same]" not in tiers
