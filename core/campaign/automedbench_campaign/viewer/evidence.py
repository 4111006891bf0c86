"""Each stage item's evidence as links into the run page: the turns, files and cases it was decided from.

A verdict names its evidence (`evidence_turns`, `evidence_files`, `evidence_cases`); a stored result from before
files and cases were recorded names only turns, and an older one may name them only in its rationale ("turn 5"),
which is read as a fallback. An item with nothing to point at still links to what was searched (the whole
trajectory for a judged item, the case table for S4/S5) or to the rule that settled it (auto-pass, excluded,
not applicable), so every grade on the page leads somewhere that explains it.
"""

from __future__ import annotations

import re
from typing import Any

from .page import esc

MAX_LINKS = 12  # of each kind, per item
TURN_MENTION = re.compile(r"\bturns?\s+(\d{1,6}(?:\s*(?:,|and|&)\s*\d{1,6})*)")
PLAN_ANCHORS = {"plan/plan.md": "plan-md", "plan/plan.png": "plan-png"}


class Anchors:
    """What the page holds to link to: turns shown, plan files, kept scripts and case rows, by their anchors."""

    def __init__(self, shown: set[int], scripts: list[str], cases: list[str]) -> None:
        self.shown = shown
        self.files = dict(PLAN_ANCHORS)
        self.files.update({path: f"script-{i}" for i, path in enumerate(scripts)})
        names: dict[str, list[str]] = {}
        for path in scripts:
            names.setdefault(path.rsplit("/", 1)[-1], []).append(path)
        # a file named by its base name alone ("segment.py") links when that name is unambiguous
        self.by_name = {name: self.files[paths[0]] for name, paths in names.items() if len(paths) == 1}
        self.by_name.update({path.rsplit("/", 1)[-1]: anchor for path, anchor in PLAN_ANCHORS.items()})
        self.cases = {case: f"case-{i}" for i, case in enumerate(cases)}

    def file(self, path: str) -> str | None:
        clean = path.strip().removeprefix("/workspace/").removeprefix("./")
        return self.files.get(clean) or self.by_name.get(clean.rsplit("/", 1)[-1])


def mentioned_turns(text: str) -> list[int]:
    """Turn numbers a rationale names ("turn 5", "turns 3, 4 and 7"): the fallback for old verdicts."""
    found: list[int] = []
    for match in TURN_MENTION.finditer(text[:20_000] if isinstance(text, str) else ""):
        found += [int(n) for n in re.findall(r"\d+", match.group(1))]
    return list(dict.fromkeys(found))[:MAX_LINKS]


def _ints(values: Any) -> list[int]:
    return [v for v in (values or [])[:MAX_LINKS * 4] if isinstance(v, int) and not isinstance(v, bool)]


def _strs(values: Any) -> list[str]:
    return [v for v in (values or [])[:MAX_LINKS * 4] if isinstance(v, str)]


def item_links(item: dict[str, Any], stage: dict[str, Any], anchors: Anchors) -> list[str]:
    """The item's evidence as HTML fragments, links first; never empty."""
    links: list[str] = []
    turns = _ints(item.get("evidence_turns")) or mentioned_turns(str(item.get("rationale", "")))
    for turn in turns[:MAX_LINKS]:
        links.append(f'<a href="#turn-{turn}">turn {turn}</a>' if turn in anchors.shown else f"turn {turn}")
    for path in _strs(item.get("evidence_files"))[:MAX_LINKS]:
        anchor = anchors.file(path)
        label = esc(path, 200)
        links.append(f'<a href="#{anchor}"><code>{label}</code></a>' if anchor else f"<code>{label}</code>")
    cases = _strs(item.get("evidence_cases"))
    if len(cases) > 3 and set(cases) == set(anchors.cases):  # decided from every case: the table says it all
        cases = []
        links.append(f'<a href="#cases">all {len(anchors.cases)} cases</a>')
    for case in cases[:MAX_LINKS]:
        anchor = anchors.cases.get(case)
        links.append(f'<a href="#{anchor}">{esc(case, 120)}</a>' if anchor else esc(case, 120))
    if len(cases) > MAX_LINKS:
        links.append(f'<a href="#cases">{len(cases) - MAX_LINKS} more cases</a>')
    if not any(link.startswith("<a ") for link in links):
        links.append(_settled_link(item, stage, len(anchors.cases)))
    return links


def _settled_link(item: dict[str, Any], stage: dict[str, Any], cases: int) -> str:
    """Where an item with no turn, file or case on the page leads: the rule that settled it, or what was searched."""
    state = str(item.get("state", "graded"))
    if state == "auto-pass":
        earned = [i for i in stage.get("items") or [] if i.get("state") == "graded" and i.get("value")]
        if earned:
            parts = [f'<a href="#item-{esc(i.get("id"), 80)}">{esc(i.get("id"), 80)}</a>' for i in earned[:4]]
            return "credited at this tier, as " + ", ".join(parts) + " passed"
        return '<a href="#rubric-rules">credited at this tier</a>'
    if state in ("excluded", "not-applicable"):
        return f'<a href="#rubric-rules">{esc(state, 20)}: the rubric\'s rule</a>'
    if item.get("value") is None:
        return '<a href="#judge-note">not graded: the judge\'s note</a>'
    if str(stage.get("stage")) in ("S4", "S5"):  # decided from every case (an earned item names none)
        return f'<a href="#cases">all {cases} cases</a>'
    return '<a href="#trajectory">searched: the whole trajectory</a>'
