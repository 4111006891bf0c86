"""The `automedbench` command line."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from . import __version__, errors, staging
from .fsutil import printable_text
from .plugins import registry


def _console(stderr: bool = False) -> Console:
    """A console that keeps tables readable when output is piped (rich defaults to 80 columns)."""
    probe = Console(stderr=stderr)
    return Console(stderr=stderr, highlight=False, width=None if probe.is_terminal else 140)


console = _console()
err_console = _console(stderr=True)


def _kv(pairs: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise errors.UserError(f"option {pair!r} must look like KEY=VALUE")
        key, value = pair.split("=", 1)
        out[key.strip()] = value
    return out


def _data_root(value: str | None) -> Path:
    return Path(value).expanduser() if value else staging.default_data_root()


def _track(items, label: str):
    """Iterate with a transient progress bar on stderr (judging many runs with an LLM takes minutes)."""
    from rich.progress import track

    return track(items, description=label, console=err_console, transient=True,
                 disable=len(items) < 2 or not err_console.is_terminal)


class Group(click.Group):
    """Turns the harness's own errors into one line on stderr and a non-zero exit, never a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as exc:  # a typo in a command or option: one line too, with where to look
            where = exc.ctx.command_path if exc.ctx is not None else ctx.command_path
            if exc.ctx is None and ctx.invoked_subcommand:  # the parser's own errors (`--agent` with no value)
                where = f"{ctx.command_path} {ctx.invoked_subcommand}"  # carry no context: name the subcommand
            err_console.print(f"[red]error:[/] {escape(exc.format_message())} (see '{where} --help')",
                              soft_wrap=True)
            sys.exit(2)
        except errors.UserError as exc:
            err_console.print(f"[red]error:[/] {escape(str(exc))}", soft_wrap=True)  # one line even when piped
            sys.exit(2)
        except errors.InfrastructureError as exc:
            err_console.print(f"[red]infrastructure error:[/] {escape(str(exc))}", soft_wrap=True)
            sys.exit(3)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="automedbench")
def main() -> None:
    """Run autonomous agents through medical-AI research tasks and score every stage of their work.

    Start with `automedbench run --task segmentation/demo --agent reference`: it needs no network,
    no API key and no GPU. `automedbench plugins` lists what is installed.
    """


def _problems(reg) -> None:
    for problem in reg.problems:
        err_console.print(f"[yellow]plugin problem[/] {problem.plugin} ({problem.distribution}): "
                          + escape(str(problem.error)))


@main.command()
@click.option("--task", "task_id", required=True, help="Task id, e.g. segmentation/demo (see `automedbench tasks`).")
@click.option("--tier", type=click.Choice(["lite", "standard", "pro"]), default="lite", show_default=True,
              help="Scaffolding level of the brief (same data and metric).")
@click.option("--agent", required=True,
              help="Agent name, e.g. reference (scripted, offline), openai, anthropic (see `automedbench plugins`).")
@click.option("--agent-option", "agent_options", multiple=True, metavar="KEY=VALUE",
              help="Option passed to the agent factory; repeatable.")
@click.option("--sandbox", default="local", show_default=True, help="Sandbox backend.")
@click.option("--judge", default="rules", show_default=True, help="Judge backend for S1–S3.")
@click.option("--judge-option", "judge_options", multiple=True, metavar="KEY=VALUE",
              help="Option passed to the judge factory; repeatable.")
@click.option("--out", type=click.Path(file_okay=False), default="runs", show_default=True,
              help="Folder that receives runs/<run-id>/.")
@click.option("--data-root", type=click.Path(file_okay=False), default=None,
              help="Where staged data lives [default: $AUTOMEDBENCH_DATA or ~/.cache/automedbench/data].")
@click.option("--max-turns", type=click.IntRange(1), default=None, help="Override the task's turn budget.")
@click.option("--time-limit", type=click.FloatRange(1), default=None, help="Override the wall-clock budget (s).")
@click.option("--exec-timeout", type=click.FloatRange(1), default=None, help="Override the per-call timeout (s).")
@click.option("--memory-mb", type=click.IntRange(0), default=8192, show_default=True,
              help="Address-space limit per sandboxed call (0 = none).")
@click.option("--task-score", type=click.Choice(["strict", "partial"]), default=None,
              help="Which Task value Overall uses: strict (any missing case gives 0) or partial "
                   "[default: the task's, strict for segmentation, partial for VQA].")
@click.option("--keep-workspace", is_flag=True, help="Keep the agent's workspace after the run.")
@click.option("--gpus", default="", show_default=False, metavar="IDS",
              help="GPUs this run may use, e.g. 0 or 0,1 (sets CUDA_VISIBLE_DEVICES in the sandbox; none by default).")
@click.option("--items", is_flag=True, help="Show every rubric item in the summary.")
@click.option("--quiet", is_flag=True, help="No per-turn progress lines.")
@click.option("--eval-option", "eval_options", multiple=True, metavar="KEY=VALUE",
              help="Option for the track's evaluator (e.g. answer_judge=offline for VQA); repeatable.")
@click.option("--require-isolation/--no-require-isolation", default=False, show_default=True,
              help="Refuse to run when the sandbox cannot isolate the filesystem (local without bubblewrap).")
def run(task_id: str, tier: str, agent: str, agent_options, sandbox: str, judge: str, judge_options, out: str,
        data_root: str | None, max_turns, time_limit, exec_timeout, memory_mb, task_score, keep_workspace,
        gpus, items, quiet, eval_options, require_isolation) -> None:
    """Run one agent on one task at one tier, then score it (result in OUT/<run-id>/result.json)."""
    from .report import render
    from .runner import Run, RunOptions

    reg = registry()
    _problems(reg)
    options = RunOptions(task_id, tier, agent, sandbox, judge, Path(out), _data_root(data_root),
                         _kv(agent_options), _kv(judge_options), max_turns, time_limit, exec_timeout, memory_mb,
                         task_score, keep_workspace=keep_workspace, gpus=gpus,
                         eval_options=_kv(eval_options), require_isolation=require_isolation)
    warnings: list[str] = []

    # The run folder is named once the run is under way (first turn or phase): a sandbox that cannot
    # open (no docker engine) makes the runner remove the folder again, so it must not be announced.
    announce: list[str] = []

    def say_folder() -> None:
        if announce:
            console.print(announce.pop(), soft_wrap=True)  # a path stays on one line, to copy

    def progress(event: dict[str, Any]) -> None:
        if event["kind"] == "run_started":  # sent once the data is there and the run folder exists
            announce.append(f"run {event['run_id']}: {task_id} ({tier}) with agent {agent} -> {event['run_dir']}")
            return
        if event["kind"] == "warning":  # printed even with --quiet, and again under the summary
            warnings.append(event["text"])
            console.print(f"[bold yellow]{escape(event['text'])}[/]")
            return
        say_folder()
        if quiet:
            return
        if event["kind"] == "turn":
            tools = ", ".join(event["tools"]) or "no tool call"
            text = printable_text(event["content"] or "").strip().splitlines()
            line = escape(f"{tools}  {text[0][:80] if text else ''}")  # the model's words are not markup
            console.print(f"[dim]turn {event['turn']:>3}[/] {line}")
        elif event["kind"] == "tool" and event.get("exit_code") is not None:
            console.print(f"[dim]          exit {event['exit_code']} in {event.get('duration_s') or 0:.2f}s[/]")
        elif event["kind"] == "phase":  # scoring real volumes or an LLM judge can take minutes: say so
            console.print("[dim]scoring " + (f"{event['cases']} case(s) in the isolated evaluator…[/]"
                          if event["phase"] == "evaluate" else f"S1–S3 with the {escape(event['judge'])} judge…[/]"))

    runner = Run(options, reg, progress)
    result = runner.execute()
    say_folder()
    render(result, console, items=items)
    for line in warnings:
        console.print(f"[bold yellow]{escape(line)}[/]")
    console.print(f"result: {runner.run_dir / 'result.json'}", soft_wrap=True)
    if result.state == "infrastructure_failure":
        sys.exit(3)
    if result.state == "cancelled":
        sys.exit(130)


@main.command()
@click.option("--task", "task_id", required=True, help="Task id, e.g. segmentation/demo.")
@click.option("--submission", type=click.Path(file_okay=False), default=None,
              help="Folder with one sub-folder per case (same layout as the agent's outputs/).")
@click.option("--baseline", default=None, help="Score a built-in baseline instead (e.g. perfect, empty, constant).")
@click.option("--data-root", type=click.Path(file_okay=False), default=None,
              help="Where staged data lives [default: $AUTOMEDBENCH_DATA or ~/.cache/automedbench/data].")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Keep the frozen copy, evaluation.json and result.json here (a new or empty folder).")
@click.option("--task-score", type=click.Choice(["strict", "partial"]), default=None,
              help="strict or partial [default: the task's].")
@click.option("--items", is_flag=True, help="Show every stage item in the summary.")
@click.option("--eval-option", "eval_options", multiple=True, metavar="KEY=VALUE",
              help="Option for the track's evaluator (e.g. answer_judge=offline for VQA); repeatable.")
def evaluate(task_id: str, submission: str | None, baseline: str | None, data_root: str | None, out: str | None,
             task_score: str, items: bool, eval_options) -> None:
    """Score a folder of outputs without an agent, with the same isolated evaluator as `run`."""
    from .evaluate_cmd import evaluate_folder
    from .report import render

    if (submission is None) == (baseline is None):
        raise errors.UserError("give exactly one of --submission DIR or --baseline NAME")
    reg = registry()
    if out and Path(out).exists() and any(Path(out).iterdir()):
        raise errors.UserError(f"--out {out} already holds files; give a new or empty folder")
    work = Path(out) if out else Path(tempfile.mkdtemp(prefix="amb-eval-"))
    try:
        result = evaluate_folder(reg, task_id, Path(submission) if submission else None, baseline,
                                 _data_root(data_root), work, task_score, _kv(eval_options))
        render(result, console, items=items)
        if out:
            console.print(f"result: {work / 'result.json'}", soft_wrap=True)
    finally:
        if not out:
            shutil.rmtree(work, ignore_errors=True)


@main.command()
@click.argument("run")
@click.option("--runs", type=click.Path(file_okay=False), default="runs", show_default=True,
              help="Folder to look in when RUN is a run id.")
@click.option("--items", is_flag=True, help="Show every rubric item with rationale and evidence turns.")
@click.option("--json", "as_json", is_flag=True, help="Print the stored result.json.")
def show(run: str, runs: str, items: bool, as_json: bool) -> None:
    """Re-render a stored result (RUN is a run folder or a run id under --runs)."""
    from .report import render
    from .runfolder import RunFolder
    from .serialize import dumps

    result = RunFolder.locate(run, Path(runs)).load_result()
    if as_json:
        click.echo(dumps(result))
    else:
        render(result, console, items=items)


@main.command()
def plugins() -> None:
    """List installed tracks, agents, sandboxes, judges and metrics, and the distribution of each."""
    from rich.table import Table

    reg = registry()
    reg.tasks()
    table = Table(show_header=True, header_style="bold")
    for col in ("Kind", "Name", "Distribution", "Version", "Description"):
        table.add_column(col)
    for kind, comps in reg.components.items():
        for name in sorted(comps):
            c = comps[name]
            table.add_row(kind, name, c.distribution, c.version, c.description)
    console.print(table)
    _problems(reg)


# Columns of `automedbench tasks` besides the id, in the order a narrow terminal keeps them, with the
# width each needs to stay readable; the id column itself is never wrapped or cut (it is what you type).
TASK_COLUMNS = [("Cases", 5), ("Title", 18), ("Tiers", 17), ("Metric", 18), ("Data", 16)]
TASK_COLUMN_ORDER = ["Task", "Title", "Tiers", "Cases", "Metric", "Data"]


def tasks_table(specs: list, width: int):
    """The task listing for a terminal `width` wide: the full id always, then as many columns as fit."""
    from rich.table import Table

    id_width = max([len(s.id) for s in specs] + [4])
    used, shown = 1 + id_width + 3, {"Task"}  # a column costs its width plus padding and a border (3)
    for name, need in TASK_COLUMNS:
        if used + need + 3 > width:
            break
        used += need + 3
        shown.add(name)
    table = Table(show_header=True, header_style="bold")
    needs = dict(TASK_COLUMNS)
    columns = [c for c in TASK_COLUMN_ORDER if c in shown]
    for col in columns:
        if col == "Task":
            table.add_column(col, no_wrap=True, min_width=id_width)
        else:
            table.add_column(col, min_width=needs[col])
    for spec in sorted(specs, key=lambda s: s.id):
        cells = {"Task": spec.id, "Title": spec.title, "Tiers": ",".join(spec.tiers), "Cases": str(spec.case_count),
                 "Metric": spec.metric, "Data": "generated" if spec.demo else spec.dataset}
        table.add_row(*(cells[c] for c in columns))
    return table


@main.command()
def tasks() -> None:
    """List every task with its tiers and case count (narrow terminals drop the last columns, never the id)."""
    reg = registry()
    console.print(tasks_table([spec for _, spec in reg.tasks().values()], console.width))
    _problems(reg)


@main.command("stage")
@click.argument("task_id")
@click.option("--from", "source", type=click.Path(exists=True, file_okay=False), default=None,
              help="The dataset's official download folder (not needed for demo tasks).")
@click.option("--data-root", type=click.Path(file_okay=False), default=None)
@click.option("--force", is_flag=True, help="Re-stage even if staged already.")
def stage_cmd(task_id: str, source: str | None, data_root: str | None, force: bool) -> None:
    """Turn a dataset download into public/ (agent-visible) and private/ (scorer-only) folders."""
    reg = registry()
    track, task = reg.task(task_id)
    if not task.demo and source is None:
        raise errors.UserError(f"{task_id} needs --from PATH (the dataset's download folder)")
    root = _data_root(data_root)
    root.mkdir(parents=True, exist_ok=True)
    staged = staging.stage(track, task, root, Path(source) if source else None, force=force)
    console.print(f"staged {len(staged.case_ids)} case(s) of {task_id} under {staged.root}")


@main.command("validate-task")
@click.argument("task_id")
@click.option("--data-root", type=click.Path(file_okay=False), default=None)
def validate_task(task_id: str, data_root: str | None) -> None:
    """Checks for track authors: task file, staging, briefs for every tier, rubric, baselines."""
    from .validate import validate

    ok = validate(registry(), task_id, _data_root(data_root), console)
    sys.exit(0 if ok else 1)


@main.command()
@click.argument("runs", nargs=-1, required=True)
@click.option("--judge", required=True, help="Judge backend to re-grade with (rules, openai, anthropic, ...).")
@click.option("--judge-option", "judge_options", multiple=True, metavar="KEY=VALUE",
              help="Option for the judge, e.g. model=gpt-4o or config=agents.yaml entry=NAME; repeatable.")
@click.option("--runs-dir", type=click.Path(file_okay=False), default="runs", show_default=True,
              help="Folder to look in when a RUN is a run id.")
@click.option("--items", is_flag=True, help="Show every rubric item of each re-graded run.")
def rejudge(runs: tuple[str, ...], judge: str, judge_options, runs_dir: str, items: bool) -> None:
    """Re-grade stored runs: new S1–S3 verdicts, stages and aggregate recomputed, result.json rewritten
    atomically; the previous verdict is kept as judge.<old-judge>.<timestamp>.json."""
    from .rejudge import rejudge as regrade
    from .report import render
    from .runfolder import RunFolder

    reg = registry()
    _problems(reg)
    folders = [RunFolder.locate(r, Path(runs_dir)) for r in runs]
    for folder in folders:  # every run checked before the first result.json is rewritten
        folder.check_trajectory()
    for folder in folders:
        result = regrade(reg, folder, judge, _kv(judge_options))
        if result.judge is not None and result.judge.error:
            err_console.print(f"[yellow]{escape(str(folder))}: judge error:[/] {escape(result.judge.error)}")
        render(result, console, items=items)
        cost = result.runtime.judge_cost_usd
        console.print(f"re-graded {folder} with {judge}" + (f" (judge cost ${cost:.4f})" if cost else ""))


@main.command("judge-agreement")
@click.argument("runs", nargs=-1, required=True)
@click.option("--judge-a", required=True, help="First judge (a stored verdict by it is used when present).")
@click.option("--judge-b", required=True, help="Second judge.")
@click.option("--judge-a-option", "a_options", multiple=True, metavar="KEY=VALUE")
@click.option("--judge-b-option", "b_options", multiple=True, metavar="KEY=VALUE")
@click.option("--regrade", is_flag=True, help="Grade with both judges now even when stored verdicts exist.")
@click.option("--stored-only", is_flag=True, help="Use stored verdicts only; skip runs that lack one.")
@click.option("--runs-dir", type=click.Path(file_okay=False), default="runs", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the agreement table as JSON.")
def judge_agreement(runs, judge_a, judge_b, a_options, b_options, regrade, stored_only, runs_dir, as_json) -> None:
    """Per-item agreement and Cohen's kappa between two judges over a set of runs (nothing is rewritten)."""
    import json

    from rich.table import Table

    from .rejudge import agreement, grade, stored_verdict
    from .runfolder import RunFolder
    from .serialize import to_dict

    if stored_only and regrade:
        raise errors.UserError("--stored-only and --regrade exclude each other")
    reg = registry()
    judges: dict[str, Any] = {}
    pairs, skipped, reasons = [], [], {}
    for run_id in _track(runs, "grading"):
        folder = RunFolder.locate(run_id, Path(runs_dir))
        result = folder.load_result()
        pair = []
        for name, options in ((judge_a, a_options), (judge_b, b_options)):
            verdict = None if regrade else stored_verdict(folder, name)
            if verdict is None and not stored_only and not result.isolation.breached:
                if name not in judges:
                    judges[name] = reg.create("judge", name, **_kv(options))
                try:
                    verdict = grade(reg, folder, result, judges[name])
                except errors.UserError as exc:  # e.g. a torn trajectory: skip this run, keep the others
                    reasons[str(folder)] = str(exc)
                    verdict = None
                verdict = None if verdict is None or verdict.error else verdict
            pair.append(verdict)
        if None in pair:
            skipped.append(str(folder))
        else:
            pairs.append((pair[0], pair[1]))
    items, pooled = agreement(pairs)
    if as_json:
        click.echo(json.dumps({"judge_a": judge_a, "judge_b": judge_b, "runs": len(pairs), "skipped": skipped,
                               "items": [to_dict(i) for i in items], "pooled": to_dict(pooled)}, indent=2))
        return
    table = Table(show_header=True, header_style="bold")
    for col in ("Item", "Runs", "Agreement", "Cohen's kappa"):
        table.add_column(col)
    for row in [*items, pooled]:
        table.add_row(row.item, str(row.n), "-" if row.agreement is None else f"{row.agreement:.3f}",
                      "undefined" if row.kappa is None else f"{row.kappa:.3f}")
    console.print(f"{judge_a} vs {judge_b} over {len(pairs)} run(s)")
    console.print(table)
    for folder in skipped:
        reason = reasons.get(folder, "no usable verdict from one of the judges")
        err_console.print(f"[yellow]skipped[/] {escape(folder)}: {escape(reason)}", soft_wrap=True)
# ---------------------------------------------------------------- campaigns: sweep, codes, leaderboard


def _split(values: tuple[str, ...]) -> list[str]:
    """Accept `--agents a,b`, `--agents a --agents b` or both; keep order, drop repeats."""
    out: list[str] = []
    for value in values:
        out += [v.strip() for v in value.split(",") if v.strip() and v.strip() not in out]
    return out


@main.command()
@click.option("--agents", multiple=True, required=True, help="Agent names, comma-separated or repeated.")
@click.option("--tasks", multiple=True, required=True, help="Task ids, comma-separated or repeated.")
@click.option("--tiers", multiple=True, default=("lite",), show_default=True, help="Tiers, comma-separated.")
@click.option("--repeats", type=click.IntRange(1), default=1, show_default=True, help="Runs per cell.")
@click.option("--workers", type=click.IntRange(1), default=1, show_default=True,
              help="Runs at the same time (local processes, or Ray tasks in flight).")
@click.option("--executor", type=click.Choice(["local", "ray", "inline"]), default="local", show_default=True,
              help="local: process pool; ray: one Ray task per run (--ray-address to join a cluster); "
                   "inline: this process, one at a time.")
@click.option("--ray-address", default=None, help="Ray cluster address (default: start a local instance).")
@click.option("--cpus-per-run", type=click.FloatRange(0), default=1.0, show_default=True,
              help="CPUs Ray reserves per run (a task's params.resources overrides).")
@click.option("--gpus-per-run", type=click.FloatRange(0), default=0.0, show_default=True,
              help="GPUs Ray reserves per run (a task's params.resources overrides).")
@click.option("--retries", type=click.IntRange(0), default=2, show_default=True,
              help="Extra attempts for runs that end in infrastructure_failure (only those are retried).")
@click.option("--out", type=click.Path(file_okay=False), default="runs", show_default=True,
              help="Folder of the runs and of the manifest sweep.json; rerun to resume.")
@click.option("--sandbox", default="local", show_default=True, help="Sandbox backend for every run.")
@click.option("--judge", default="rules", show_default=True, help="Judge backend for S1–S3.")
@click.option("--agent-option", "agent_options", multiple=True, metavar="KEY=VALUE",
              help="Option passed to every agent factory; repeatable.")
@click.option("--judge-option", "judge_options", multiple=True, metavar="KEY=VALUE",
              help="Option passed to the judge factory; repeatable.")
@click.option("--data-root", type=click.Path(file_okay=False), default=None,
              help="Staged data (on a cluster: a path every node sees).")
@click.option("--max-turns", type=click.IntRange(1), default=None, help="Override each task's turn budget.")
@click.option("--time-limit", type=click.FloatRange(1), default=None,
              help="Override each task's wall-clock budget (s).")
@click.option("--memory-mb", type=click.IntRange(0), default=8192, show_default=True,
              help="Address-space limit per sandboxed call (0 = none).")
@click.option("--task-score", type=click.Choice(["strict", "partial"]), default=None,
              help="strict or partial [default: the task's].")
@click.option("--dry-run", is_flag=True, help="Print what would run and what is already finished, then stop.")
@click.option("--require-isolation/--no-require-isolation", default=True, show_default=True,
              help="Refuse runs whose sandbox cannot isolate the filesystem (local without bubblewrap).")
def sweep(agents, tasks, tiers, repeats, workers, executor, ray_address, cpus_per_run, gpus_per_run, retries, out,
          sandbox, judge, agent_options, judge_options, data_root, max_turns, time_limit, memory_mb, task_score,
          dry_run, require_isolation) -> None:
    """Run the matrix agents × tasks × tiers × repeats; resumable (finished runs are skipped).

    Run ids are deterministic, so rerunning the same command continues where it stopped. Runs that end in
    infrastructure_failure are retried up to --retries times; agent failures count as results.
    """
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from .campaign.sweep import Sweep, SweepConfig, validate

    reg = registry()
    _problems(reg)
    config = SweepConfig(_split(agents), _split(tasks), _split(tiers), repeats, workers, Path(out), executor,
                         retries, sandbox, judge, _data_root(data_root), _kv(agent_options), _kv(judge_options),
                         max_turns, time_limit, memory_mb, task_score, cpus_per_run, gpus_per_run, ray_address,
                         require_isolation)
    if dry_run:
        validate(config, reg)
        done, todo = Sweep(config, reg).plan()
        console.print(f"{len(done) + len(todo)} run(s): {len(done)} finished, {len(todo)} to run")
        for spec in todo[:50]:
            console.print(f"  {spec.run_id}")
        return
    bar = Progress(TextColumn("[bold]sweep[/]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.fields[status]}"),
                   console=err_console, transient=False)
    state: dict[str, Any] = {"task": None, "failed": 0, "retries": 0}

    def stop_bar() -> None:  # rich prints a newline on stop even if the bar never started
        if bar.live.is_started:
            bar.stop()

    def progress(event: dict[str, Any]) -> None:
        if event["kind"] == "start":  # the bar starts only now: a bad name or unstaged task stays one line
            err_console.print(f"{event['total']} run(s): {event['skipped']} already finished, {event['todo']} to run")
            bar.start()
            state["task"] = bar.add_task("sweep", total=event["todo"], status=f"cost ${event['cost_usd']:.2f}")
            return
        if event["kind"] == "note":
            bar.console.print(escape(event["message"]))
            return
        if event.get("retry"):
            state["retries"] += 1
            bar.update(state["task"], total=bar.tasks[0].total + 1)
        elif event["state"] not in ("scored", "agent_failure"):
            state["failed"] += 1
        status = f"cost ${event['cost_usd']:.2f} · retried {state['retries']} · failed {state['failed']}"
        bar.update(state["task"], advance=1, status=status)
        if event["state"] == "infrastructure_failure":
            bar.console.print(f"[yellow]{event['run_id']}[/]: infrastructure failure: "
                              + escape(str(event.get("error"))))

    try:
        report = Sweep(config, reg, progress).run()
    except KeyboardInterrupt:
        stop_bar()
        err_console.print("interrupted: rerun the same command to resume")
        sys.exit(130)
    finally:
        stop_bar()
    states = ", ".join(f"{n} {s}" for s, n in sorted(report.states.items()))
    console.print(f"sweep: {report.total} run(s) ({report.skipped} skipped, {report.ran} executed, "
                  f"{report.retried} retried): {states}; cost ${report.cost_usd:.2f}; {report.wall_s:.1f}s")
    console.print(f"manifest: {report.manifest}")
    if report.states.get("infrastructure_failure"):
        sys.exit(3)


@main.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--tagger", default=None, metavar="JUDGE",
              help="Also ask this judge backend (one with complete(system, prompt)) to tag the runs.")
@click.option("--tagger-option", "tagger_options", multiple=True, metavar="KEY=VALUE")
@click.option("--dry-run", is_flag=True, help="Show the codes but do not rewrite result.json.")
def codes(runs, tagger, tagger_options, dry_run) -> None:
    """(Re)tag stored runs with error codes E1–E5; RUNS are run folders or folders of runs.

    Codes are diagnostic only: scores are never changed. Harness codes (H-BREACH, ...) are kept.
    """
    from .campaign.store import find_runs
    from .codes import tag_run
    from .codes.llm import tagger_from_registry
    from .runfolder import RunFolder
    from .serialize import write_json

    reg = registry()
    llm = tagger_from_registry(reg, tagger, _kv(tagger_options)) if tagger else None
    found = find_runs(Path(r) for r in runs)
    if not found:
        raise errors.UserError("no run folders (with result.json) under " + ", ".join(runs))
    outputs: dict[str, list[str]] = {}
    for run_dir in found:
        result = RunFolder(run_dir).load_result()
        if result.header.task not in outputs:
            try:
                outputs[result.header.task] = list(reg.task(result.header.task)[1].output_files)
            except errors.UserError:
                outputs[result.header.task] = []
        fired = tag_run(run_dir, result, reg, outputs[result.header.task], llm)
        if not dry_run:
            write_json(RunFolder(run_dir).result, result)
        label = ", ".join(f"{c.code}" for c in fired) or "none"
        console.print(f"{run_dir.name}: {label}")
        for c in fired:
            turns = f" (turns {', '.join(map(str, c.evidence_turns))})" if c.evidence_turns else ""
            console.print(f"    [dim]{c.code} {escape(c.source)}: {escape(c.message + turns)}[/]")


@main.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--by", default="agent,task_id,tier", show_default=True,
              help="Grouping keys, from agent, task_id, track, tier (e.g. --by agent for one row per agent).")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), default=None, help="Write the rows as CSV.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              help="Write rows and analyses as JSON.")
@click.option("--html", "html_path", type=click.Path(dir_okay=False), default=None,
              help="Write a static HTML report with plots.")
@click.option("--resamples", type=click.IntRange(100), default=2000, show_default=True, help="Bootstrap resamples.")
@click.option("--seed", type=int, default=0, show_default=True, help="Bootstrap seed (same seed, same CIs).")
@click.option("--quiet", is_flag=True, help="No terminal table.")
def leaderboard(runs, by, csv_path, json_path, html_path, resamples, seed, quiet) -> None:
    """Leaderboard over stored runs (folders of runs) with bootstrap CIs and the paper's analyses."""
    import json

    from .campaign.htmlreport import render_html
    from .campaign.leaderboard import GROUP_KEYS, build, to_json
    from .campaign.render import render_terminal, to_csv
    from .campaign.store import load_table
    from .fsutil import atomic_write_text

    keys = tuple(k.strip() for k in by.split(",") if k.strip())
    bad = [k for k in keys if k not in GROUP_KEYS]
    if bad or not keys:
        raise errors.UserError(f"--by {by!r}: choose keys from {', '.join(GROUP_KEYS)}")
    table = load_table(Path(r) for r in runs)
    if not len(table):
        raise errors.UserError("no run folders (with result.json) under " + ", ".join(runs))
    board = build(table, by=keys, resamples=resamples, seed=seed)
    if not quiet:
        render_terminal(board, console)
    # reports are meant to be shared: the file mode a plain open() would give, not mkstemp's 0600
    if csv_path:
        atomic_write_text(Path(csv_path), to_csv(board), shared=True)
    if json_path:
        atomic_write_text(Path(json_path), json.dumps(to_json(board), indent=1) + "\n", shared=True)
    if html_path:
        atomic_write_text(Path(html_path), render_html(board, table), shared=True)
    for label, path in (("csv", csv_path), ("json", json_path), ("html", html_path)):
        if path:
            console.print(f"{label}: {path}")


@main.group()
def images() -> None:
    """Build the docker sandbox's images locally (no registry needed)."""


@images.command("build")
@click.option("--base-image", default=None,
              help="Use this existing image (with python3) as the base instead of building one with debootstrap.")
@click.option("--force", is_flag=True, help="Rebuild even when an image with the same recipe exists.")
def images_build(base_image: str | None, force: bool) -> None:
    """Build the base, one agent image per track with a Dockerfile in docker/agent/, and the evaluator.

    Images whose recipe (Dockerfile folder, parent image, fetched wheels) is unchanged are kept.
    """
    from .sandboxes.docker_images import build_all

    for tag in build_all(lambda line: console.print(line), base_image=base_image, force=force):
        console.print(f"[green]ok[/] {tag}")


if __name__ == "__main__":
    main()
