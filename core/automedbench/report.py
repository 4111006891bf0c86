"""Readable terminal summaries of a result (rich tables)."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from attrs import asdict
from rich.columns import Columns
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from .nextstep import next_step
from .options import rerun_command
from .records import Result
from .scoring import truncate
from .verdictcaps import capped_items


def fmt(value: float | None) -> str:
    """Three decimals, truncated: the display never shows a value above the one a rating used."""
    return "null" if value is None else truncate(value)


COUNT_SUFFIXES = ("_count", "_cases")


def fmt_component(value: float | None, name: str = "", counts: Collection[str] = ()) -> str:
    """A count prints as an integer, a score keeps three decimals, so a count of 0 reads `0`, not the score-like
    `0.000`. Counts are the metric's declared ones (`MetricBlock.counts`); a result that declares none (written
    before they were) falls back to its names (`*_count` / `*_cases`) and to whole numbers above 1."""
    if value is not None and float(value).is_integer() and (
            name in counts or abs(value) > 1 or name.endswith(COUNT_SUFFIXES)):
        return str(int(value))
    return fmt(value)


def with_unit(text: str, name: str, units: Mapping[str, str]) -> str:
    """A formatted value with its metric-declared unit (`MetricBlock.units`), none beside a null."""
    unit = units.get(name) if isinstance(units, Mapping) else None
    return f"{text} {unit}" if unit and text != "null" else text


def render(result: Result, console: Console, *, items: bool = False, command: bool = False) -> None:
    """The result as a terminal summary; `command` adds the command line that makes a run like it (for `show`:
    who reads a stored run did not type it)."""
    h, a = result.header, result.aggregate
    # the judge's version names its model for an LLM judge (`1/gpt-4o`): which model graded, beside the backend
    version = f" (version {escape(result.judge.judge_version)})" if result.judge and result.judge.judge_version else ""
    console.print(f"[bold]run {h.run_id}[/]  task {h.task}  tier {h.tier}  agent {h.agent}  "
                  f"sandbox {h.sandbox}  judge {h.judge}{version}")
    console.print(f"state [bold]{result.state}[/] ({result.end_reason})  turns {result.runtime.turns}  "
                  f"wall {result.runtime.wall_s:.1f}s  harness {result.runtime.harness_s:.1f}s "
                  f"({result.runtime.harness_cpu_s:.2f} CPU-s)")
    if command and (line := rerun_command(asdict(h))):
        console.print(f"rerun: {escape(line)}", soft_wrap=True)
    rt, jv = result.runtime, result.judge
    if rt.tokens_in or rt.tokens_out or rt.judge_cost_usd or (jv and jv.tokens_in):
        judge_tokens = f" ({jv.tokens_in} in / {jv.tokens_out} out tokens)" if jv and jv.tokens_in else ""
        console.print(f"agent: {rt.tokens_in} in / {rt.tokens_out} out tokens, ${rt.cost_usd:.4f}   "
                      f"judge: ${rt.judge_cost_usd:.4f}{judge_tokens}")
        unpriced = [who for who, tokens, cost in (("agent", rt.tokens_in + rt.tokens_out, rt.cost_usd),
                                                  ("judge", jv.tokens_in + jv.tokens_out if jv else 0,
                                                   rt.judge_cost_usd)) if tokens and not cost]
        if unpriced:  # an unknown model costs 0: a $0.0000 beside thousands of tokens read as a free model
            console.print(f"[yellow]{' and '.join(unpriced)} cost $0 for tokens spent[/]: no price is known for "
                          "its model (or it is priced at 0); `--agent-option` / `--judge-option prices=FILE` or "
                          "the model config's `pricing:` gives one (USD per 1M tokens)", soft_wrap=True)
    if rt.agent_program:  # which release of an installed system made the run
        console.print(f"agent program: {escape(rt.agent_program)}", soft_wrap=True)
    if rt.other_models:  # helper-model calls (or any other name) the configured model answered
        named = ", ".join(f"{name} ×{count}" for name, count in sorted(rt.other_models.items()))
        console.print("the agent's program also asked for other models, all served by the run's: " + escape(named),
                      soft_wrap=True)
    table = Table(show_header=True, header_style="bold")
    for col in ("Stage", "Name", "Weight", "Score", "Rule"):
        table.add_column(col)
    for stage in result.stages:
        table.add_row(stage.stage, stage.name, f"{stage.weight:.2f}", fmt(stage.score), escape(stage.rule))
        if items:
            for item in stage.items:
                turns = ",".join(map(str, item.evidence_turns))
                files = ", ".join(item.evidence_files[:5])
                cases = ", ".join(item.evidence_cases[:5]) + (" …" if len(item.evidence_cases) > 5 else "")
                named = (("turns", turns), ("files", files), ("cases", cases))
                evidence = "".join(f" [{k} {v}]" for k, v in named if v)
                shown = "n/a" if item.state in ("not-applicable", "excluded") else fmt(item.value)
                table.add_row("", f"  {item.id}", "", shown, escape(item.rationale + evidence))
    if result.stages:  # a cancelled or failed-before-scoring run has none: no empty table
        console.print(table)
    if result.task is not None:
        # escaped: "[used: strict]" is plain text, not rich markup
        console.print(f"Task ({escape(result.task.name)}): strict {fmt(result.task.strict)}  partial "
                      f"{fmt(result.task.partial)}  " + escape(f"[used: {result.task.used}]"))
        if result.task.components:  # one cell per component, so a name is never split from its value
            task = result.task
            console.print(Columns([Text(f"{k} {with_unit(fmt_component(v, k, task.counts), k, task.units)}")
                                   for k, v in task.components.items()], padding=(0, 3)))
            for name, why in task.notes.items():  # why a null is null, under the columns it would widen
                if task.components.get(name) is None:
                    console.print(Text(f"{name} null: {why}"))
    console.print(f"[bold]Agentic {fmt(a.agentic)}  Task {fmt(a.task)}  Overall {fmt(a.overall)}  "
                  f"Rating {a.rating}[/] (" + escape(a.rating_reason) + ")")
    if a.agentic is None and result.stages:
        console.print(f"  a stage is null; with nulls as 0 Agentic would be {fmt(a.agentic_nulls_as_zero)}")
    if result.judge is not None and result.judge.error:  # why S1–S3 are null, and how to grade them later
        console.print("[yellow]  the judge could not grade:[/] " + escape(result.judge.error)
                      + f" (once it answers: automedbench rejudge <run folder> --judge {escape(h.judge)} ...)",
                      soft_wrap=True)
    capped = capped_items(result.judge) if result.judge is not None and not result.judge.error else []
    if capped:  # the judge's grade lowered to what the harness observed: said, not only inside each rationale
        console.print(f"  the harness capped {len(capped)} of the {escape(h.judge)} judge's item grade(s) to what it "
                      f"observed: {escape(', '.join(capped[:12]))}" + (" …" if len(capped) > 12 else "")
                      + " (why: `automedbench show <run> --items` or the run page)", soft_wrap=True)
    if result.summary_plots is not None:  # Pro: asked for by the brief, reported, never scored
        plots = result.summary_plots
        console.print("summary plots (Pro, not scored): " + (escape(f"{len(plots)} present: {', '.join(plots[:8])}")
                                                              if plots else "absent"))
    bad = [c for c in result.cases if not c.valid]
    for case in bad[:10]:
        console.print(f"  case {case.case_id}: " + escape("; ".join(case.reasons)))
    if len(bad) > 10:
        console.print(f"  ... and {len(bad) - 10} more invalid case(s)")
    if not result.isolation.verified:
        console.print("[bold yellow]UNVERIFIED[/] — not a trusted score; leaderboards and code analyses leave it "
                      "out unless --include-unverified")
        for reason in result.isolation.unverified[:10]:
            console.print("  " + escape(reason))
    if result.isolation.breached:
        console.print("[bold red]ISOLATION BREACH[/] — all scores zeroed")
        for ev in result.isolation.evidence[:10]:
            console.print(f"  turn {ev.turn}: {ev.kind}: " + escape(ev.path))
    for code in result.error_codes:  # diagnostic only: codes never change a score
        turns = f" [turns {','.join(map(str, code.evidence_turns))}]" if code.evidence_turns else ""
        console.print(f"  code {code.code} ({escape(code.source)}): " + escape(code.message + turns))
    if result.error:
        console.print("[red]error:[/] " + escape(result.error))
    step = next_step(result.end_reason, {"task": h.task, "tier": h.tier, "agent": h.agent})
    if step:
        console.print("[bold]next:[/] " + escape(step))
