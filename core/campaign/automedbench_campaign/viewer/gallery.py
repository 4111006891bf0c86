"""The run page's pictures and files: plan.md, plan.png (which S1 grades), Pro's summary plots, the scripts the
agent ran, and each case's picture (input, output, reference) with its texts.

Images are embedded as data URIs so the page stays one offline file. An agent-made image (plan.png, a plot) is
never embedded as it came: it is header-checked, decoded within limits and re-encoded small
(`automedbench.planimage`); case pictures were drawn by the evaluator (`automedbench.pictures`) and are read back with a
size cap. Every text is escaped (`page.esc`).
"""

from __future__ import annotations

import base64
import io
import re
from typing import Any

from automedbench.api import read_json_object
from automedbench.engine import MAX_LEGEND_LABELS, MAX_SCRIPT_BYTES, PICTURES_DIR, SCRIPTS_DIR, RunFolder, read_plan_png
from automedbench.engine import MAX_PICTURE_BYTES as MAX_CASE_BYTES
from automedbench.engine import MAX_PICTURE_TEXT_CHARS as MAX_TEXT_CHARS
from automedbench.engine import PICTURE_INDEX as INDEX

from .page import esc, pre

PLAN_SIDE = 900  # plan.png shown at most this wide/high
PLOT_SIDE = 420
MAX_PLOTS = 12
MAX_INDEX_BYTES = 4 << 20
PICTURE_NAME = re.compile(r"case-\d{4}\.png")


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def agent_png(data: bytes | None, side: int) -> tuple[str | None, str]:
    """An agent-made PNG as a small re-encoded data URI (never its own bytes), or None and why not."""
    plan = read_plan_png(data)
    if plan.image is None:
        return None, plan.note
    image = plan.image.copy()  # type: ignore[attr-defined]
    image.thumbnail((side, side))
    buffer = io.BytesIO()
    # the format from the name, which loads only the PNG writer (format="PNG" first imports five other
    # formats' plugins); the default compression: optimize=True took twice the time for 3 % fewer bytes
    buffer.name = "page.png"
    image.save(buffer)
    return data_uri(buffer.getvalue()), plan.note


def plan_section(folder: RunFolder) -> str:
    """plan.md and plan.png (anchors `plan-md`, `plan-png`, present or not: S1's items link here)."""
    plan = folder.plan_md()
    md = (pre(plan, label="plan/plan.md", fold_over=6000) if plan else
          '<p class="bad">plan/plan.md was not written (or is empty).</p>')
    uri, note = agent_png(folder.plan_png(), PLAN_SIDE)
    if uri:
        png = (f'<figure class="plan"><img src="{uri}" alt="plan.png, the agent\'s pipeline diagram">'
               f'<figcaption class="note">plan/plan.png ({esc(note, 200)}), shown re-encoded</figcaption></figure>')
    else:
        png = f'<p class="bad">plan/plan.png: {esc(note, 300)}</p>'
    plots = plots_html(folder)
    return (f'<h2 id="plan">Plan</h2><section id="plan-md"><h3>plan/plan.md</h3>{md}</section>'
            f'<section id="plan-png"><h3>plan/plan.png</h3>{png}</section>{plots}')


def plots_html(folder: RunFolder) -> str:
    names = sorted(p.name for p in (folder.artefacts / "plots").glob("*.png"))[:MAX_PLOTS] \
        if (folder.artefacts / "plots").is_dir() else []
    figures = []
    for name in names:
        uri, _ = agent_png(folder.read_bytes(f"{RunFolder.ARTEFACTS}/plots/{name}", 32 << 20), PLOT_SIDE)
        if uri:
            figures.append(f'<figure><img src="{uri}" alt="summary plot {esc(name, 100)}"><figcaption class="note">'
                           f"{esc(name, 100)}</figcaption></figure>")
    return f'<h3>Summary plots</h3><div class="gallery">{"".join(figures)}</div>' if figures else ""


def kept_scripts(folder: RunFolder) -> list[str]:
    """Workspace paths of the scripts kept in artefacts/scripts/ (sorted; at most the collector's count)."""
    root = folder.artefacts / SCRIPTS_DIR
    if not root.is_dir() or root.is_symlink():
        return []
    found = [p.relative_to(root).as_posix() for p in sorted(root.rglob("*"))[:200]
             if p.is_file() and not p.is_symlink()]
    return found[:40]


def scripts_section(folder: RunFolder, scripts: list[str]) -> str:
    if not scripts:
        return ""
    blocks = []
    for index, path in enumerate(scripts):
        text = folder.read_text(f"{RunFolder.ARTEFACTS}/{SCRIPTS_DIR}/{path}", MAX_SCRIPT_BYTES)
        blocks.append(f'<section id="script-{index}"><h3><code>{esc(path, 300)}</code></h3>'
                      f'{pre(text or "(unreadable)", label=path, fold_over=3000)}</section>')
    return ('<h2 id="scripts">Scripts the agent ran</h2><p class="note">As they were in the workspace when the run '
            "ended (the turns that wrote and ran them are in the trajectory).</p>" + "".join(blocks))


def picture_index(folder: RunFolder) -> dict[str, dict[str, Any]]:
    """The evaluator's picture index: case id -> its entry (file, texts, caption, note)."""
    data = read_json_object(folder.path, f"{PICTURES_DIR}/{INDEX}", MAX_INDEX_BYTES) or {}
    cases = data.get("cases")
    return {str(e.get("case_id")): e for e in (cases or []) if isinstance(e, dict)}


MARK_WORDS = {"mask": "masks in one colour per label (label 1 red, 2 green, 3 yellow)",
              "boxes-output": "output boxes orange", "boxes-reference": "reference boxes green",
              "boxes-input": "input boxes blue"}


def _listed(value: Any) -> list[Any]:
    """An index entry's list field, or none: an entry is read from a run folder, a list is not taken on trust."""
    return value if isinstance(value, list) else []


def pictures_legend(index_of: dict[str, dict[str, Any]]) -> str:
    """What this run's pictures show, from what the evaluator drew (masks, boxes, texts): one caption for every
    track called a VQA image's boxes orange and a denoised slice's masks coloured."""
    entries = list(index_of.values())
    head = "Each case: the input, the agent's output and the reference, drawn after the run by the evaluator"
    if not any(isinstance(e.get("marks"), list) for e in entries):  # drawn before the index said what it drew
        return f"{head} (masks in one colour per label, output boxes orange, reference boxes green)."
    marks = {m for e in entries for m in _listed(e.get("marks")) if isinstance(m, str)}
    parts = [MARK_WORDS[m] for m in MARK_WORDS if m in marks]
    named = list(dict.fromkeys(str(n)[:80] for e in entries for n in _listed(e.get("labels"))[:MAX_LEGEND_LABELS]))
    named = named[:MAX_LEGEND_LABELS]
    if "mask" in marks and named:  # the track said what its labels are: name them, not their numbers
        parts[0] = f"masks: {', '.join(named)}"
    titles = list(dict.fromkeys(str(t.get("title"))[:40] for e in entries for t in _listed(e.get("texts"))[:6]
                                if isinstance(t, dict) and t.get("title")))[:6]
    if titles:
        parts.append(f"{', '.join(titles[:-1]) + ' and ' if len(titles) > 1 else ''}{titles[-1]} under it")
    return f"{head}: {'; '.join(parts)}." if parts else f"{head}: the images as they are, no overlay."


def case_body(folder: RunFolder, entry: dict[str, Any], case: str) -> str:
    """One case's picture, its texts (input, answer, reference side by side) and the evaluator's caption and note;
    "" when the entry holds none of them (shared by the run page's gallery and a task page's sample)."""
    body = ""
    name = str(entry.get("file") or "")
    data = folder.read_bytes(f"{PICTURES_DIR}/{name}", MAX_CASE_BYTES) if PICTURE_NAME.fullmatch(name) else None
    if data is not None:
        body += (f'<img src="{data_uri(data)}" alt="case {esc(case, 200)}: input, output and reference">')
    texts = [t for t in (entry.get("texts") or []) if isinstance(t, dict)][:6]
    if texts:
        cells = "".join(f'<div class="{esc(t.get("role", ""), 20)}"><div class="muted">{esc(t.get("title"), 120)}'
                        f"</div>{pre(t.get('text'), MAX_TEXT_CHARS, fold_over=1500)}</div>" for t in texts)
        body += f'<div class="texts">{cells}</div>'
    for note in (entry.get("caption"), entry.get("note")):
        if note:
            body += f'<p class="note">{esc(note, 600)}</p>'
    return body


def case_figure(folder: RunFolder, entry: dict[str, Any] | None, index: int, case: str, status: str) -> str:
    """One case's picture and its texts, linked back to its row."""
    if entry is None:
        body = '<p class="muted">no picture (pictures were not drawn for this run)</p>'
    else:
        body = case_body(folder, entry, case) or '<p class="muted">no picture for this case</p>'
    return (f'<figure class="case" id="picture-{index}"><figcaption><a href="#case-{index}">{esc(case, 200)}</a> '
            f"{status}</figcaption>{body}</figure>")
