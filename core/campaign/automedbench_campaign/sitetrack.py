"""What a track's and a task's site pages say beyond the numbers: the track's own description, each task's rating
bands, what a task's data takes before a run can start, and the best run of each task (a track's page listed its
runs by agent, so its best ones took a search through every row)."""

from __future__ import annotations

import math
from typing import Any

from automedbench.engine import registry

from .store import RunTable
from .viewer.page import esc, num


def track_description(track: str) -> str:
    """The installed track's one-line description (what `automedbench plugins` prints), or "" when it is not
    installed here or registered none."""
    try:
        return str(registry().get("track", track).description or "")
    except Exception:  # not installed here: the page says so elsewhere
        return ""


def rating_bands(spec: Any) -> str:
    """`spec`'s letter bands in words: the Task value each letter starts at (a page gave the letter, not where its
    band starts)."""
    rating = spec.rating
    bands = f"A at {num(rating.good)}, B at {num(rating.okay)}"
    floor = getattr(rating, "floor", None)
    bands += f", C at {num(floor)}, below F" if floor is not None else ", below C"
    return f"rated {bands}"


def task_data(spec: Any) -> str:
    """What a task's data takes before its first run: a demo makes its own; a release task names its download and
    licence, the command that stages it and where its budget, disk, network and sandbox needs are said."""
    if spec.demo:
        return "<p>Data: generated in code on its first run (no download, no credentials).</p>"
    dataset = esc(spec.dataset, 600) if spec.dataset else "its dataset's official download"
    licence = f" ({esc(spec.license, 300)})" if spec.license else ""
    return (f"<p>Data: {dataset}{licence}; your download is staged once with "
            f"<code>automedbench stage {esc(spec.id, 200)} --from PATH</code>; <code>automedbench tasks "
            f"{esc(spec.id, 200)}</code> says its time and turn budget, the disk its workspace reserves, its network "
            "and what its sandbox needs, and whether this machine is ready.</p>")


def best_runs(table: RunTable, pages: dict[int, str], rows: list[int], up: str = "") -> str:
    """Each task's best-scoring run among `rows` (highest Overall; a run with none is left out), linked to its
    page; "" when no run has an Overall."""
    best: dict[str, int] = {}
    for i in rows:
        overall = float(table["overall"][i])
        if math.isnan(overall):
            continue
        task_id = str(table["task_id"][i])
        if task_id not in best or overall > float(table["overall"][best[task_id]]):
            best[task_id] = i
    if not best:
        return ""
    items = []
    for task_id, i in sorted(best.items()):
        run_id = esc(table["run_id"][i], 120)
        link = f'<a href="{up}{pages[i]}">{run_id}</a>' if i in pages else run_id
        items.append(f"<li>{esc(task_id, 200)}: {link} ({esc(table['agent'][i], 200)}, {esc(table['tier'][i])}, "
                     f"Overall {num(float(table['overall'][i]))}, rating {esc(table['rating'][i], 2)})</li>")
    return f'<h2 id="best">Best run per task</h2><ul class="best">{"".join(items)}</ul>'


def tracks_measured(ran: set[str], page: Any) -> str:
    """Every installed track in a line: its description and its task count, linked (`page(track)`) when it has
    runs here; the tracks page gave a table of the tracks with runs and no word of what any of them measures."""
    items = []
    for name in sorted(registry().components["track"]):
        try:
            count = len(registry().track(name).tasks())
        except Exception:  # a track that fails to load: `automedbench tasks` says why
            continue
        label = f'<a href="{page(name)}">{esc(name, 200)}</a>' if name in ran else esc(name, 200)
        described = track_description(name)
        items.append(f"<li>{label}: {esc(described, 400) + '; ' if described else ''}{count} task(s)"
                     f"{'' if name in ran else ', no runs here'}</li>")
    if not items:
        return ""
    return ('<h2 id="measured">What each track measures</h2><p>Each track scores its own task metric (Task) beside '
            f'the five stages of the work; its page lists its tasks, their metrics and rating bands.</p>'
            f'<ul class="measures">{"".join(items)}</ul>')
