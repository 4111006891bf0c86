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


class Group(click.Group):
    """Turns the harness's own errors into one line on stderr and a non-zero exit, never a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except errors.UserError as exc:
            err_console.print(f"[red]error:[/] {escape(str(exc))}")
            sys.exit(2)
        except errors.InfrastructureError as exc:
            err_console.print(f"[red]infrastructure error:[/] {escape(str(exc))}")
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
        err_console.print(f"[yellow]plugin problem[/] {problem.plugin} ({problem.distribution}): {problem.error}")


@main.command()
@click.option("--task", "task_id", required=True, help="Task id, e.g. segmentation/demo (see `automedbench tasks`).")
@click.option("--tier", type=click.Choice(["lite", "standard", "pro"]), default="lite", show_default=True,
              help="Scaffolding level of the brief (same data and metric).")
@click.option("--agent", default="reference", show_default=True, help="Agent name (see `automedbench plugins`).")
@click.option("--agent-option", "agent_options", multiple=True, metavar="KEY=VALUE",
              help="Option passed to the agent factory; repeatable.")
@click.option("--sandbox", default="local", show_default=True, help="Sandbox backend.")
@click.option("--judge", default="rules", show_default=True, help="Judge backend for S1–S3.")
@click.option("--judge-option", "judge_options", multiple=True, metavar="KEY=VALUE")
@click.option("--out", type=click.Path(file_okay=False), default="runs", show_default=True,
              help="Folder that receives runs/<run-id>/.")
@click.option("--data-root", type=click.Path(file_okay=False), default=None,
              help="Where staged data lives [default: $AUTOMEDBENCH_DATA or ~/.cache/automedbench/data].")
@click.option("--max-turns", type=click.IntRange(1), default=None, help="Override the task's turn budget.")
@click.option("--time-limit", type=click.FloatRange(1), default=None, help="Override the wall-clock budget (s).")
@click.option("--exec-timeout", type=click.FloatRange(1), default=None, help="Override the per-call timeout (s).")
@click.option("--memory-mb", type=click.IntRange(0), default=8192, show_default=True,
              help="Address-space limit per sandboxed call (0 = none).")
@click.option("--task-score", type=click.Choice(["strict", "partial"]), default="strict", show_default=True,
              help="Which Task value Overall uses: strict (any missing case gives 0) or partial.")
@click.option("--keep-workspace", is_flag=True, help="Keep the agent's workspace after the run.")
@click.option("--items", is_flag=True, help="Show every rubric item in the summary.")
@click.option("--quiet", is_flag=True, help="No per-turn progress lines.")
def run(task_id: str, tier: str, agent: str, agent_options, sandbox: str, judge: str, judge_options, out: str,
        data_root: str | None, max_turns, time_limit, exec_timeout, memory_mb, task_score, keep_workspace,
        items, quiet) -> None:
    """Run one agent on one task at one tier, then score it (result in OUT/<run-id>/result.json)."""
    from .report import render
    from .runner import Run, RunOptions

    reg = registry()
    _problems(reg)
    options = RunOptions(task_id, tier, agent, sandbox, judge, Path(out), _data_root(data_root),
                         _kv(agent_options), _kv(judge_options), max_turns, time_limit, exec_timeout, memory_mb,
                         task_score, keep_workspace=keep_workspace)

    def progress(event: dict[str, Any]) -> None:
        if quiet:
            return
        if event["kind"] == "turn":
            tools = ", ".join(event["tools"]) or "no tool call"
            text = (event["content"] or "").strip().splitlines()
            console.print(f"[dim]turn {event['turn']:>3}[/] {tools}  {text[0][:80] if text else ''}")
        elif event["kind"] == "tool" and event.get("exit_code") is not None:
            console.print(f"[dim]          exit {event['exit_code']} in {event.get('duration_s') or 0:.2f}s[/]")

    runner = Run(options, reg, progress)
    console.print(f"run {runner.run_id}: {task_id} ({tier}) with agent {agent} -> {runner.run_dir}")
    result = runner.execute()
    render(result, console, items=items)
    console.print(f"result: {runner.run_dir / 'result.json'}")
    if result.state == "infrastructure_failure":
        sys.exit(3)
    if result.state == "cancelled":
        sys.exit(130)


@main.command()
@click.option("--task", "task_id", required=True)
@click.option("--submission", type=click.Path(file_okay=False), default=None,
              help="Folder with one sub-folder per case (same layout as the agent's outputs/).")
@click.option("--baseline", default=None, help="Score a built-in baseline instead (e.g. perfect, empty, constant).")
@click.option("--data-root", type=click.Path(file_okay=False), default=None)
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Keep the frozen copy, evaluation.json and result.json here.")
@click.option("--task-score", type=click.Choice(["strict", "partial"]), default="strict", show_default=True)
@click.option("--items", is_flag=True)
def evaluate(task_id: str, submission: str | None, baseline: str | None, data_root: str | None, out: str | None,
             task_score: str, items: bool) -> None:
    """Score a folder of outputs without an agent, with the same isolated evaluator as `run`."""
    from .evaluate_cmd import evaluate_folder
    from .report import render

    if (submission is None) == (baseline is None):
        raise errors.UserError("give exactly one of --submission DIR or --baseline NAME")
    reg = registry()
    work = Path(out) if out else Path(tempfile.mkdtemp(prefix="amb-eval-"))
    try:
        result = evaluate_folder(reg, task_id, Path(submission) if submission else None, baseline,
                                 _data_root(data_root), work, task_score)
        render(result, console, items=items)
        if out:
            console.print(f"result: {work / 'result.json'}")
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
    from .records import Result
    from .report import render
    from .serialize import dumps, read_json

    path = Path(run)
    if not path.exists():
        path = Path(runs) / run
    if path.is_dir():
        path = path / "result.json"
    result = read_json(path, Result)
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


@main.command()
def tasks() -> None:
    """List every task with its tiers and case count."""
    from rich.table import Table

    reg = registry()
    table = Table(show_header=True, header_style="bold")
    for col in ("Task", "Title", "Tiers", "Cases", "Metric", "Data"):
        table.add_column(col)
    for task_id, (_, spec) in sorted(reg.tasks().items()):
        table.add_row(task_id, spec.title, ",".join(spec.tiers), str(spec.case_count), spec.metric,
                      "generated" if spec.demo else spec.dataset)
    console.print(table)
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


if __name__ == "__main__":
    main()


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
