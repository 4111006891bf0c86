"""One run as one offline HTML page: header, stages with every rubric item linked to its evidence (the turns,
files and cases it was decided from: `evidence`), the Task per case with each case's picture (`gallery`), the
plan (plan.md, plan.png), the scripts the agent ran, error codes, breach evidence, and the trajectory turn by turn.

Everything is read from the run folder through `RunFolder`'s bounded, no-follow loaders; pages of huge
runs are bounded too (`MAX_TURNS` turns shown, each text field cut at `page.MAX_FIELD_CHARS`)."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from typing import Any

from automedbench.api import CASE_LEFT_OUT, dumps
from automedbench.engine import RunFolder, fmt_component, next_step, registry, rerun_command, with_unit

from .evidence import Anchors, item_links
from .gallery import case_figure, kept_scripts, picture_index, pictures_legend, plan_section, scripts_section
from .page import document, esc, num, pre

MAX_TURNS = 400  # turns rendered; later turns are listed as left out, with the count
MAX_CASES = 2000  # per-case rows
# per-case values shown as columns, in the track's order (its metric first); 8 keep the table within a laptop's
# width (VQA's 11 made it 2200 px at 16: tests/test_site_browser.py); the rest are named under the table
MAX_VALUE_COLUMNS = 8
TURN_EVENTS = ("assistant", "tool", "no_tool_call", "context_overflow", "context_trimmed", "api_retry", "breach",
               "note")


def _link_turns(turns: list[Any], shown: set[int]) -> str:
    links = []
    for turn in turns[:50]:
        if isinstance(turn, int) and not isinstance(turn, bool):
            links.append(f'<a href="#turn-{turn}">turn {turn}</a>' if turn in shown else f"turn {turn}")
    return ", ".join(links) or '<span class="muted">–</span>'


def _header(data: dict[str, Any]) -> str:
    h, rt, iso = data.get("header") or {}, data.get("runtime") or {}, data.get("isolation") or {}
    agg = data.get("aggregate") or {}
    rating = str(agg.get("rating", ""))[:2]
    unverified = iso.get("verified") is False
    marks = []
    if iso.get("breached"):
        marks.append('<span class="bad">BREACH</span>')
    if unverified:
        marks.append('<span class="warn">unverified</span> (no trusted isolation: '
                     + esc("; ".join(map(str, iso.get("unverified") or iso.get("gaps") or []))[:600], 600)
                     + ")")
    rows = [("task", h.get("task")), ("tier", h.get("tier")), ("agent", h.get("agent")),
            ("sandbox", h.get("sandbox")), ("judge", h.get("judge")), ("started", h.get("started_at")),
            ("state", f"{data.get('state')} ({data.get('end_reason')})"), ("error", data.get("error") or "–"),
            *([("next", step)] if (step := next_step(str(data.get("end_reason") or ""), h)) else []),
            *([("rerun", command)] if (command := rerun_command(h)) else []),
            ("versions", ", ".join(f"{k} {v}" for k, v in (h.get("versions") or {}).items())),
            ("cost", f"${rt.get('cost_usd', 0):.4f} agent + ${rt.get('judge_cost_usd', 0):.4f} judge"),
            ("tokens", f"{rt.get('tokens_in', 0)} in, {rt.get('tokens_out', 0)} out"),
            ("time", f"wall {rt.get('wall_s', 0)} s; agent/model {rt.get('agent_s', 0)} s; tools "
                     f"{rt.get('exec_s', 0)} s; harness {rt.get('harness_s', 0)} s (evaluation {rt.get('eval_s', 0)} s,"
                     f" judge {rt.get('judge_s', 0)} s)"),
            ("turns", f"{rt.get('turns', 0)} turns, {rt.get('tool_calls', 0)} tool calls"),
            *([("other models", asked)] if (asked := _other_models(rt.get("other_models"))) else [])]
    kv = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v, 2000)}</dd>" for k, v in rows)
    score = (f'<p>Overall <b>{num(agg.get("overall"))}</b> · Agentic {num(agg.get("agentic"))} · Task '
             f'{num(agg.get("task"))} · <span class="badge {esc(rating)}">rating {esc(rating)}</span> '
             f'<span class="muted">{esc(agg.get("rating_reason", ""), 400)}</span> {" ".join(marks)}</p>')
    return (f"<h1>Run {esc(h.get('run_id', '?'), 100)}</h1>{score}"
            f'<section id="header"><dl class="kv">{kv}</dl></section>')


def _other_models(value: Any) -> str:
    """The model names an installed program asked for besides the run's (`Runtime.other_models`), as `show` says
    them: each was served by the run's model, so the run stays comparable (not a condition), but a reader comparing
    runs sees that a helper model's calls were answered by the big one. Anything but names with counts is left out."""
    if not isinstance(value, dict):
        return ""
    named = [f"{name[:200]} ×{count}" for name, count in sorted(value.items())[:50]
             if isinstance(name, str) and isinstance(count, int) and not isinstance(count, bool) and count > 0]
    return "asked for by the agent's program, all served by the run's model: " + ", ".join(named) if named else ""


def _stages(data: dict[str, Any], anchors: Anchors) -> str:
    rows = []
    for stage in data.get("stages") or []:
        rows.append(f'<tr id="stage-{esc(stage.get("stage"), 10)}"><th>{esc(stage.get("stage"), 10)} '
                    f'{esc(stage.get("name"), 40)}</th><th class="n">{num(stage.get("score"))}</th>'
                    f'<th class="n">w {esc(stage.get("weight"), 10)}</th><th colspan="2"></th></tr>')
        for item in stage.get("items") or []:
            state = str(item.get("state", ""))
            value = num(item.get("value")) if state != "excluded" else "excluded"
            rows.append(f'<tr id="item-{esc(item.get("id"), 80)}"><td><code>{esc(item.get("id"), 80)}</code><br>'
                        f'<span class="muted">{esc(item.get("description"), 600)}</span></td>'
                        f'<td class="n">{value}</td><td>{esc(state, 30)}</td>'
                        f'<td>{esc(item.get("rationale"), 2000)}</td>'
                        f'<td class="ev">{", ".join(item_links(item, stage, anchors))}</td></tr>')
    judge = data.get("judge") or {}
    if judge.get("judge"):
        note = (f'<p class="note" id="judge-note">judge: {esc(judge.get("judge", ""), 80)} version '
                f'{esc(judge.get("judge_version", ""), 40)}')
    else:  # `automedbench evaluate --out`: outputs scored without an agent, so nothing was judged
        note = '<p class="note" id="judge-note">judge: none (no agent ran: S1–S3 were not graded)'
    note += f' — error: {esc(judge.get("error"), 500)}</p>' if judge.get("error") else "</p>"
    note += _rubric_rules(data)
    return ('<h2 id="stages">Stages and rubric items</h2><div class="scroll"><table class="stages"><tr class="cols">'
            '<th>item</th><th class="n">value</th><th>state</th><th>rationale</th><th>evidence</th></tr>'
            + "".join(rows) + "</table></div>" + note)


def _rubric_rules(data: dict[str, Any]) -> str:
    """What settles items without a judge at this tier: auto-pass, excluded, not applicable, and the conditions."""
    tier = esc((data.get("header") or {}).get("tier", ""), 20)
    settled = [(i.get("id"), i.get("state"), i.get("rationale")) for s in data.get("stages") or []
               for i in s.get("items") or [] if i.get("state") in ("auto-pass", "excluded", "not-applicable")]
    rows = "".join(f"<li><code>{esc(i, 80)}</code> {esc(state, 20)}: {esc(why, 400)}</li>" for i, state, why in settled)
    conditions = (data.get("rubric") or {}).get("conditions") or {}
    if isinstance(conditions, dict) and conditions:
        rows += "".join(f"<li>condition <code>{esc(k, 80)}</code>: {esc(v, 400)}</li>"
                        for k, v in list(conditions.items())[:40])
    return (f'<details id="rubric-rules"><summary>rubric rules at the {tier} tier ({len(settled)} item(s) settled '
            f"without the judge)</summary><ul>{rows or '<li>none</li>'}</ul>"
            '<p class="note">A tier\'s auto-passed items are credited only when a graded item of the same stage '
            "passed.</p></details>")


def _value(value: Any) -> str:
    """A component's or case's value; None as the terminal shows it ("null"), not an empty cell that reads as a
    value lost (enhancement's LPIPS where its weights are absent: the case's note says why)."""
    if value is None:
        return '<span class="muted">null</span>'
    return num(value) if isinstance(value, float) else esc(value, 40)


def _metric_words(header: dict[str, Any]) -> str:
    """The Task metric in its task file's words, when the task installed here is the one the run was made on (the
    same digest): a metric's name alone ("ssim", "mlrg-offline") said nothing of the window, the data range or
    what the report metric averages. "" when the task is not installed here or was defined otherwise."""
    try:
        spec = registry().task(str(header.get("task")))[1]
    except Exception:  # a page of another machine's run: the name is all there is
        return ""
    if hashlib.sha256(dumps(spec).encode("utf-8")).hexdigest() != (header.get("hashes") or {}).get("task"):
        return ""
    return str(spec.metric)


def _component(name: str, value: Any, counts: list[str], units: dict[str, str]) -> str:
    """A Task component as the terminal summary prints it: a count (the metric's `counts`) as a whole number, a
    score to three places, either with its declared unit (PSNR in dB)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return esc(with_unit(fmt_component(float(value), name, counts), name, units))
    return _value(value)


def _units(task: dict[str, Any], key: str = "units", limit: int = 20) -> dict[str, str]:
    """The metric's declared units (or `notes`), as strings (a stored result is read as it is: a forged one holds
    anything)."""
    declared = task.get(key)
    if not isinstance(declared, dict):
        return {}
    return {str(k): v[:limit] for k, v in list(declared.items())[:200] if isinstance(v, str)}


def _case_value(row: dict[str, Any], name: str) -> str:
    """One per-case value; one the Task leaves out for this case (a segmentation case with no lesion: its lesion
    Dice is 1 by convention, out of the Task's mean) says so, where it read as a perfect score that counted."""
    cell = _value(row.get(name, "–"))
    left_out = row.get(CASE_LEFT_OUT)
    why = left_out.get(name) if isinstance(left_out, dict) else None
    # its own wrapping line: a one-line note in a right-aligned, unwrapped number cell pushed the row's links off
    return cell + (f' <span class="left-out">(not in the Task: {esc(why, 300)})</span>' if why else "")


def _cases(data: dict[str, Any], evaluation: dict[str, Any] | None) -> list[str]:
    """Case ids in the order the page lists them (their rows are `case-<index>`)."""
    task = data.get("task") or {}
    verdicts = [str(c.get("case_id")) for c in ((evaluation or {}).get("cases") or []) if isinstance(c, dict)]
    rows = [str(c.get("case_id")) for c in (task.get("per_case") or []) if isinstance(c, dict)]
    return list(dict.fromkeys([*verdicts, *rows]))[:MAX_CASES]


def _task(data: dict[str, Any], evaluation: dict[str, Any] | None, manifest: dict[str, Any] | None,
          folder: RunFolder, pictures: bool) -> str:
    task = data.get("task") or {}
    comps = task.get("components") or {}
    head = f'<h2 id="task">Task: {esc(task.get("name"), 300)}</h2>'
    words = _metric_words(data.get("header") or {})
    if words and words != task.get("name"):
        head += f'<p class="measures">What it measures: {esc(words, 1000)}</p>'
    head += (f'<p>strict <b>{num(task.get("strict"))}</b>, partial {num(task.get("partial"))}, Overall uses '
             f'<b>{esc(task.get("used"), 20)}</b></p>')
    units = _units(task)
    if comps:
        # as the terminal shows them (`fmt_component`): a count of 24 answered read "24.000" here and "24" there
        declared = task.get("counts")
        counts = [str(c) for c in declared[:200]] if isinstance(declared, list) else []
        head += "<p>" + " · ".join(f"{esc(k, 80)} {_component(k, v, counts, units)}"
                                   for k, v in list(comps.items())[:40]) + "</p>"
        nulls = [(k, why) for k, why in _units(task, "notes", 600).items() if k in comps and comps[k] is None]
        head += "".join(f'<p class="note">{esc(k, 80)} null: {esc(why, 600)}</p>' for k, why in nulls[:20])
    verdicts = {str(c.get("case_id")): c for c in ((evaluation or {}).get("cases") or []) if isinstance(c, dict)}
    per_case = {str(c.get("case_id")): c for c in (task.get("per_case") or []) if isinstance(c, dict)}
    files: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for entry in ((manifest or {}).get("files") or [])[:20000]:
        if isinstance(entry, dict):
            files[str(entry.get("path", "")).split("/", 1)[0]].append(entry)
    cases = list(dict.fromkeys([*verdicts, *per_case]))
    # the track's own order (its metric first: SSIM, a VQA score, BLEU...), not the alphabet's: cut at the first 8
    # sorted names, the page hid the per-case SSIM, VQA score and METEOR; validity is the status column already
    named = list(dict.fromkeys(k for c in per_case.values() for k in c if k not in ("case_id", "valid", CASE_LEFT_OUT)))
    # values (numbers, flags) ahead of labels (answer keys, kinds), each in that order: which keys come first
    # depends on which case comes first (a VQA staging opening with a multiple-choice question names its keys
    # before the open questions' exact_match and token_f1), and the columns are capped
    numeric = {k for c in per_case.values() for k, v in c.items() if isinstance(v, (int, float))}
    named.sort(key=lambda k: k not in numeric)
    value_keys = named[:MAX_VALUE_COLUMNS]
    index_of = picture_index(folder) if pictures else {}
    rows, figures = [], []
    for index, case in enumerate(cases[:MAX_CASES]):
        verdict, values = verdicts.get(case, {}), per_case.get(case, {})
        valid = verdict.get("valid")
        status = ('<span class="ok">valid</span>' if valid else
                  '<span class="bad">missing</span>' if verdict and not verdict.get("present") else
                  '<span class="bad">invalid</span>' if verdict else '<span class="muted">?</span>')
        reasons = "; ".join(map(str, verdict.get("reasons") or []))
        cells = "".join(f'<td class="n">{_case_value(values, k)}</td>' for k in value_keys)
        picture = f' · <a href="#picture-{index}">picture</a>' if index_of else ""
        rows.append(f'<tr id="case-{index}"><td>{esc(case, 200)}</td><td>{status}</td>{cells}'
                    f'<td>{esc(reasons, 2000)}</td><td><a href="#outputs-{index}">outputs</a>{picture}</td></tr>')
        if index_of:
            figures.append(case_figure(folder, index_of.get(case), index, case, status))
    more = (f'<p class="note">{len(cases) - MAX_CASES} more cases not shown.</p>' if len(cases) > MAX_CASES else "")
    if len(named) > len(value_keys):
        more += (f'<p class="note">{len(named) - len(value_keys)} more per-case values not shown: '
                 f'{esc(", ".join(named[len(value_keys):]), 600)} (all in evaluation.json).</p>')
    table = ('<div class="scroll" id="cases"><table><tr><th>case</th><th>status</th>'
             + "".join(f'<th class="n">{esc(k, 60)}' + (f' <span class="muted">({esc(units[k], 20)})</span>'
                                                         if k in units else "") + "</th>" for k in value_keys)
             + "<th>reasons</th><th></th></tr>" + "".join(rows) + "</table></div>" + more)
    if index_of:
        note = f'<p class="note">{esc(pictures_legend(index_of), 4000)}</p>'
        table += f'<h3 id="pictures">Cases in pictures</h3>{note}<div class="gallery">{"".join(figures)}</div>'
    elif pictures:
        table += ('<p class="note" id="pictures">No case pictures in this run folder (the run was made with '
                  "--no-pictures, or before pictures were drawn).</p>")

    listing = []
    for index, case in enumerate(cases[:MAX_CASES]):
        items = "".join(f"<li><code>{esc(e.get('path'), 400)}</code> {esc(e.get('size'), 20)} bytes"
                        + (f' <span class="bad">rejected: {esc(e.get("rejected"), 300)}</span>' if e.get("rejected")
                           else "") + "</li>" for e in files.get(case, [])[:200])
        listing.append(f'<li id="outputs-{index}"><b>{esc(case, 200)}</b><ul>{items or "<li>no files</li>"}</ul></li>')
    extra = [e for k, v in files.items() if k not in set(cases) for e in v][:200]
    if extra:
        listing.append("<li><b>other files</b><ul>" + "".join(f"<li><code>{esc(e.get('path'), 400)}</code></li>"
                                                             for e in extra) + "</ul></li>")
    outputs = f'<h3 id="outputs">Submitted files per case</h3><ul>{"".join(listing)}</ul>'
    return head + table + outputs


def _codes(data: dict[str, Any], shown: set[int]) -> str:
    codes = data.get("error_codes") or []
    if not codes:
        return '<h2 id="codes">Error codes</h2><p class="muted">none fired</p>'
    rows = "".join(f"<tr><td><b>{esc(c.get('code'), 20)}</b></td><td>{esc(c.get('stage'), 10)}</td>"
                   f"<td>{esc(c.get('message'), 2000)}</td><td>{esc(c.get('source'), 40)}</td>"
                   f"<td>{_link_turns(c.get('evidence_turns') or [], shown)}</td></tr>" for c in codes[:500])
    return ('<h2 id="codes">Error codes</h2><div class="scroll"><table><tr><th>code</th><th>stage</th>'
            f"<th>message</th><th>source</th><th>evidence</th></tr>{rows}</table></div>")


def _breach(data: dict[str, Any], shown: set[int]) -> str:
    iso = data.get("isolation") or {}
    evidence = iso.get("evidence") or []
    out = ""
    if evidence:
        rows = "".join(f"<tr><td>{_link_turns([e.get('turn')], shown)}</td><td>{esc(e.get('kind'), 300)}</td>"
                       f"<td><code>{esc(e.get('path'), 1000)}</code></td><td>{pre(e.get('command'), 4000)}</td></tr>"
                       for e in evidence[:200])
        out += ('<h2 id="breach" class="bad">Breach evidence</h2><div class="scroll"><table><tr><th>turn</th>'
                f"<th>what</th><th>path</th><th>command</th></tr>{rows}</table></div>")
    gaps = iso.get("gaps") or []
    out += (f'<details><summary>isolation: {len(iso.get("protections") or [])} protections, {len(gaps)} gaps'
            '</summary><h3>protections</h3><ul>'
            + "".join(f"<li>{esc(p, 600)}</li>" for p in (iso.get("protections") or [])[:200])
            + "</ul><h3>gaps</h3><ul>" + "".join(f"<li>{esc(g, 600)}</li>" for g in gaps[:200]) + "</ul></details>")
    return out


def _arguments(call: dict[str, Any]) -> str:
    raw = call.get("arguments")
    try:
        args = json.loads(raw) if isinstance(raw, str) and len(raw) < 2_000_000 else raw
    except (ValueError, RecursionError):
        args = raw
    if isinstance(args, dict) and isinstance(args.get("code"), str):
        rest = {k: v for k, v in args.items() if k != "code"}
        return (f'<div class="muted">{esc(call.get("name"), 80)} {esc(json.dumps(rest)[:300], 300)}</div>'
                + pre(args["code"], label="code", fold_over=4000))
    return f'<div class="muted">{esc(call.get("name"), 80)}</div>' + pre(raw if isinstance(raw, str) else
                                                                        json.dumps(raw), label="arguments")


def _event(event: dict[str, Any]) -> str:
    kind = event.get("type")
    if kind == "assistant":
        parts = [pre(event.get("content"), label="assistant", fold_over=3000)]
        if event.get("reasoning"):
            parts.append(pre(event.get("reasoning"), label="reasoning", fold_over=0))
        for call in (event.get("tool_calls") or [])[:64]:
            if isinstance(call, dict):
                source = f' <span class="muted">(recovered from text: {esc(call.get("source"), 40)})</span>' \
                    if call.get("source") else ""
                parts.append(f'<div class="call">call <code>{esc(call.get("id"), 80)}</code>{source}'
                             f"{_arguments(call)}</div>")
        unmetered = event.get("observed_by") and not (event.get("tokens_in") or event.get("tokens_out"))
        tokens = "tokens not reported by the provider" if unmetered else \
            f'tokens {esc(event.get("tokens_in"), 12)} in / {esc(event.get("tokens_out"), 12)} out'
        meta = (f'<p class="note">{tokens} · {esc(event.get("latency_s"), 12)} s · finish '
                f'{esc(event.get("finish_reason"), 30)}</p>')
        return "".join(parts) + meta
    if kind == "tool":
        if "result" in event:
            reply = esc(json.dumps(event.get("result"))[:2000])
            return f'<div>tool <b>{esc(event.get("name"), 80)}</b> → {reply}</div>'
        if event.get("error"):
            return (f'<div>tool <b>{esc(event.get("name"), 80)}</b> <span class="bad">{esc(event.get("error"), 80)}'
                    f'</span> {esc(event.get("reason", ""), 400)}</div>')
        code = event.get("exit_code")
        status = '<span class="ok">exit 0</span>' if code == 0 else f'<span class="bad">exit {esc(code, 12)}</span>'
        extra = " · timed out" if event.get("timed_out") else ""
        changed = event.get("changed_cases") or []
        files = f" · changed outputs of {len(changed)} case(s): {esc(', '.join(map(str, changed[:20])), 600)}" \
            if changed else ""
        streams = "".join(pre(event.get(name), label=name) +
                          (f'<p class="note">full {name}: <code>{esc(event.get(name + "_file"), 300)}</code></p>'
                           if event.get(name + "_file") else "") for name in ("stdout", "stderr"))
        return (f'<div>result of <code>{esc(event.get("call_id"), 80)}</code>: {status} · '
                f'{esc(event.get("duration_s"), 12)} s{extra}{files}</div>{streams}')
    if kind == "no_tool_call":
        return (f'<div class="warn">no tool call ({esc(event.get("action"), 20)}; '
                f'{esc(event.get("hint", ""), 40)} {esc(event.get("detail", ""), 400)})</div>'
                + pre(event.get("message"), label="message sent", fold_over=0))
    if kind == "breach":
        return f'<div class="bad">breach: {esc(", ".join(map(str, event.get("paths") or [])), 2000)}</div>'
    fields = {k: v for k, v in event.items() if k not in ("type", "turn", "t")}
    return f'<div class="muted">{esc(kind, 40)}: {esc(json.dumps(fields)[:1000], 1000)}</div>'


def _trajectory(events: list[dict[str, Any]]) -> tuple[str, set[int]]:
    turns: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        turn = event.get("turn")
        if event.get("type") in TURN_EVENTS and isinstance(turn, int) and not isinstance(turn, bool):
            turns[turn].append(event)
    order = sorted(turns)
    shown = set(order[:MAX_TURNS])
    blocks = []
    for turn in order[:MAX_TURNS]:
        t = turns[turn][0].get("t")
        when = f' <span class="muted">t = {esc(t, 12)} s</span>' if t is not None else ""
        blocks.append(f'<section class="turn" id="turn-{turn}"><h3>Turn {turn}{when}</h3>'
                      + "".join(_event(e) for e in turns[turn][:200]) + "</section>")
    if len(order) > MAX_TURNS:
        blocks.append(f'<p class="note">{len(order) - MAX_TURNS} later turns not shown (turns {order[MAX_TURNS]}–'
                      f"{order[-1]}); the whole trajectory is trajectory.jsonl in the run folder.</p>")
    end = next((e for e in reversed(events) if e.get("type") == "end"), None)
    if end:
        blocks.append(f'<p class="muted">end: {esc(end.get("reason"), 80)}</p>')
    return '<h2 id="trajectory">Trajectory</h2>' + "".join(blocks), shown


def render_run(folder: RunFolder, result: dict[str, Any] | None = None, back: str = "", pictures: bool = True) -> str:
    """The page for the run in `folder` (`result`: the record as plain JSON, if not yet on disk; `back`: a
    link to the page listing it, for a campaign site; `pictures=False` leaves out the case pictures, drawn from
    the data, e.g. for a site published where the dataset's licence does not allow its images)."""
    data = result if result is not None else folder.json_data(RunFolder.RESULT)
    if data is None:
        raise ValueError(f"{folder}: no readable {RunFolder.RESULT}")
    trajectory, shown = _trajectory(folder.events())
    evaluation = folder.evaluation_data()
    scripts = kept_scripts(folder)
    anchors = Anchors(shown, scripts, _cases(data, evaluation))
    links = [(back, "← all runs")] if back else []
    links += [("#header", "run"), ("#stages", "stages"), ("#task", "task"), *([("#pictures", "pictures")] * pictures),
              ("#plan", "plan"), *([("#scripts", "scripts")] * bool(scripts)), ("#codes", "codes"),
              ("#trajectory", "trajectory")]
    # a space between links: with none the line cannot wrap, and "trajectory" ran off a 390 px screen
    nav = "<nav>" + " ".join(f'<a href="{esc(href, 300)}">{text}</a>' for href, text in links) + "</nav>"
    body = (_header(data) + _stages(data, anchors)
            + _task(data, evaluation, folder.json_data(RunFolder.MANIFEST), folder, pictures)
            + _codes(data, shown) + _breach(data, shown) + plan_section(folder) + scripts_section(folder, scripts)
            + trajectory)
    title = f"{(data.get('header') or {}).get('task', 'run')} · {(data.get('header') or {}).get('run_id', '')}"
    return document(title, body, nav)
