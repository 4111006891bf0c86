"""The `automedbench` command line."""

from __future__ import annotations

import shlex
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from . import __version__, errors, interrupt, staging
from .fsutil import printable_text
from .options import DATA_ROOT_DEFAULT, RunOptions, click_options, data_root_or_default, from_cli, warm_wanted
from .plugins import CommandContext, component_options, install_hint, registry
from .progress import StagingProgress, WaitTicker
from .staging import INCOMING
from .terminal import SafeConsole, json_terminal_safe


def _console(stderr: bool = False) -> SafeConsole:
    """A console that keeps tables readable when output is piped (rich defaults to 80 columns)."""
    probe = Console(stderr=stderr)
    # agent text (tool output, file names, codes) is printed through it: escape sequences shown, never sent
    return SafeConsole(stderr=stderr, highlight=False, width=None if probe.is_terminal else 140)


console = _console()
err_console = _console(stderr=True)


class Group(click.Group):
    """Turns the harness's own errors into one line on stderr and a non-zero exit, never a traceback; holds
    the engine's commands and adds those features register (`automedbench_register_commands`) on first use."""

    def feature_commands(self) -> dict[str, click.Command]:
        reg = registry()
        seen = len(reg.problems)
        found = reg.commands(reserved=self.commands, context=command_context())
        print_problems(reg, reg.problems[seen:])  # a clash or a failing hook, said once when first met
        return {name: comp.factory for name, comp in found.items()}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.feature_commands()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = self.commands.get(cmd_name) or self.feature_commands().get(cmd_name)
        hint = None if found is not None else install_hint("command", cmd_name)
        if hint is not None:  # a command of an optional part that is not installed: say which extra
            raise errors.UserError(hint)
        return found

    def invoke(self, ctx: click.Context) -> Any:
        for each in (console, err_console):  # a command run again in the same process (tests) starts heard
            each.quiet, each.lost = False, ""
        # SIGTERM/SIGHUP unwind like Ctrl-C: mounts, cgroups, reservations and sandboxes are released
        with interrupt.terminate_as_interrupt():
            return self._invoke(ctx)

    def _invoke(self, ctx: click.Context) -> Any:
        if ctx.obj is None:  # what a plugin's command gets of the command line (`@click.pass_obj`)
            ctx.obj = command_context()
        try:
            return super().invoke(ctx)
        except interrupt.Terminated as exc:  # not closed by the command itself (e.g. during staging)
            err_console.print(f"interrupted: {exc}", soft_wrap=True)
            sys.exit(interrupt.exit_status())
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
        except errors.SubmissionError as exc:  # `evaluate` of a submission past the evaluator's limits: no traceback
            err_console.print(f"[red]submission error:[/] {escape(str(exc))}", soft_wrap=True)
            sys.exit(1)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="automedbench")
def main() -> None:
    """Run autonomous agents through medical-AI research tasks and score every stage of their work.

    Start with `automedbench run --task toy/vowels --agent reference`: the core's own toy track, with no
    network, no API key and no GPU. `automedbench tasks` lists every installed task (a track's demo, e.g.
    segmentation/demo, runs the same way); `automedbench plugins` lists what is installed.
    """


def say_left_out(run_dir: Path, result: Any, warnings: Sequence[str] = ()) -> None:
    """Where the run page is, or why it is not there: the campaign's page failed (its warning), or one line naming
    what the core alone left out of the run and the extra to add."""
    from .detectors import NOT_TAGGED
    from .runfolder import RunFolder

    page = run_dir / RunFolder.VIEW
    if page.is_file():
        console.print(f"page: {page} (every grade with its evidence, each case's picture)", soft_wrap=True)
        return
    failed = [w.removeprefix("WARNING: ") for w in warnings if w.startswith("WARNING: campaign:")]
    if failed:  # installed, and its page hook failed: "pip install" it again would not help
        console.print("[yellow]" + escape(f"the run page (view.html) was not written: {failed[0][:300]}; "
                                          f"`automedbench view {run_dir}` writes it once that is fixed") + "[/]",
                      soft_wrap=True)
        return
    left = ["the run page (view.html)"] + (["error codes E1–E5"] if any(c.code == NOT_TAGGED
                                                                        for c in result.error_codes) else [])
    console.print("[yellow]" + escape(f"left out by the core alone: {' and '.join(left)}; "
                                      "pip install 'automedbench[campaign]' adds them") + "[/]", soft_wrap=True)


def say_lost(run_dir: Path) -> None:
    """On stderr, when stdout's reader went away (`| head`, a closed terminal): the run went on to its record, and
    the command that prints what the terminal lost."""
    if console.lost:
        err_console.print(escape(f"the output stopped: {console.lost}; the run went on to its end: "
                                 f"`automedbench show {run_dir}` prints its summary"), soft_wrap=True)


def print_problems(reg, problems: list | None = None) -> None:
    """Each plugin problem (one that failed to load, a name clash) on one line of stderr."""
    for problem in reg.problems if problems is None else problems:
        err_console.print(f"[yellow]plugin problem[/] {problem.plugin} ({problem.distribution}): "
                          + escape(str(problem.error)), soft_wrap=True)  # one line: a path is not cut


def command_context() -> CommandContext:
    """The command line as a plugin's commands see it; the registry is looked up when a command asks."""
    return CommandContext(console, err_console, lambda: registry(), print_problems)


@main.command()
@click_options("task", "tier", "agent", "agent_options", "sandbox", "judge", "judge_options", "out", "data_root",
               "max_turns", "time_limit_s", "exec_timeout_s", "memory_mb", "task_score", "keep_workspace",
               "workspace_quota_mb", "gpus", "repeat_limit", agent={"required": True})
@click.option("--items", is_flag=True, help="Show every rubric item in the summary.")
@click.option("--quiet", is_flag=True, help="No per-turn progress lines.")
@click_options("eval_options", "require_isolation", "warm_evaluator", "pictures")
def run(items: bool, quiet: bool, **fields: Any) -> None:
    """Run one agent on one task at one tier, then score it (result in OUT/<run-id>/result.json)."""
    from .report import render
    from .runner import Run

    reg = registry()
    print_problems(reg)
    options = RunOptions(**from_cli(fields))
    warnings: list[str] = []

    # The run folder is named once the run is under way (first turn or phase): a sandbox that cannot
    # open (no docker engine) makes the runner remove the folder again, so it must not be announced.
    announce: list[str] = []

    def say_folder() -> None:
        if announce:
            console.print(announce.pop(), soft_wrap=True)  # a path stays on one line, to copy

    # a long wait (an agent's call, the evaluator: METEOR's Java alone takes ~10-30 s, an LLM judge) is shown
    ticker = WaitTicker(console)

    def progress(event: dict[str, Any]) -> None:
        ticker.stop()  # the wait it showed is over: this event's line comes next
        if event["kind"] == "run_started":  # sent once the data is there and the run folder exists
            announce.append(f"run {event['run_id']}: {options.task} ({options.tier}) with agent {options.agent} "
                            f"-> {event['run_dir']}")
            return
        if event["kind"] == "preparing":  # before staging and the agent: what the run will take
            if not quiet:
                console.print(escape(f"{options.task} ({options.tier}), agent {options.agent}: {event['needs']}"),
                              soft_wrap=True)
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
            label = "session " if event.get("session") else f"turn {event['turn']:>3}"
            console.print(f"[dim]{label}[/] {line}")
            if event["tools"]:
                ticker.start(f"{'session' if event.get('session') else 'turn ' + str(event['turn'])}: "
                             f"{', '.join(event['tools'])} running")
        elif event["kind"] == "tool" and event.get("exit_code") is not None:
            console.print(f"[dim]          exit {event['exit_code']} in {event.get('duration_s') or 0:.2f}s[/]")
        elif event["kind"] == "tool" and event.get("observed"):  # a program's step whose answer gave no exit code
            console.print("[dim]          exit code unknown (refused by the program, still running, or disputed)[/]")
        elif event["kind"] == "phase":  # scoring real volumes or an LLM judge can take minutes: say so
            console.print("[dim]scoring " + (f"{event['cases']} case(s) in the isolated evaluator…[/]"
                          if event["phase"] == "evaluate" else f"S1–S3 with the {escape(event['judge'])} judge…[/]"))
            ticker.start("scoring in the isolated evaluator" if event["phase"] == "evaluate"
                         else f"judging S1–S3 with the {event['judge']} judge")

    runner = Run(options, reg, progress)
    try:
        result = runner.execute()
    finally:
        ticker.stop()
    say_folder()
    render(result, console, items=items)
    for line in warnings:
        console.print(f"[bold yellow]{escape(line)}[/]")
    console.print(f"result: {runner.run_dir / 'result.json'}", soft_wrap=True)
    say_left_out(runner.run_dir, result, warnings)
    say_lost(runner.run_dir)
    if result.state == "infrastructure_failure":
        sys.exit(3)
    if result.state == "cancelled":
        sys.exit(interrupt.exit_status())  # 130 on Ctrl-C, 143 on SIGTERM
    if result.judge is not None and result.judge.error:
        say_ungraded(runner.run_dir, result.header.judge)
        sys.exit(1)


def say_ungraded(run_dir: Path, judge: str) -> None:
    """A run its judge could not grade ended with exit 0 and Overall null: a script running many took it for a
    graded run. Exit 1 (as `rejudge` in that case), the run recorded, and the command that grades it."""
    err_console.print(escape(f"not graded: the {judge} judge could not grade S1–S3, so Agentic and Overall are null; "
                             f"the run is recorded. Next, once the judge answers: automedbench rejudge {run_dir} "
                             f"--judge {judge} (with the same --judge-option's)"), soft_wrap=True)


@main.command()
@click_options("task", task={"help": "Task id, e.g. segmentation/demo."})
@click.option("--submission", type=click.Path(file_okay=False), default=None,
              help="Folder with one sub-folder per case (same layout as the agent's outputs/).")
@click.option("--baseline", default=None, help="Score a built-in baseline instead (e.g. perfect, empty, constant).")
@click_options("data_root")
@click.option("--out", "keep_in", type=click.Path(file_okay=False), default=None,  # not RunOptions.out: no run folder
              help="Keep the frozen copy, evaluation.json, result.json and the cases' pictures here (a new or "
                   "empty folder), for `automedbench view OUT`.")
@click_options("task_score", task_score={"help": "strict or partial [default: the task's]."})
@click.option("--items", is_flag=True, help="Show every stage item in the summary.")
@click_options("eval_options", "pictures", pictures={
    "help": "With --out: draw each case's picture (input, output, reference) there for its page (`automedbench "
            "view OUT`); --no-pictures leaves them out."})
def evaluate(submission: str | None, baseline: str | None, keep_in: str | None, items: bool, **fields: Any) -> None:
    """Score a folder of outputs without an agent, with the same isolated evaluator as `run`; with --out, the
    records and each case's picture are kept for `automedbench view OUT`."""
    from .evaluate_cmd import EvaluateOptions, evaluate_folder
    from .report import render
    from .run_origin import staging_note

    if (submission is None) == (baseline is None):
        raise errors.UserError("give exactly one of --submission DIR or --baseline NAME")
    o = from_cli(fields)
    reg = registry()
    if keep_in and Path(keep_in).exists() and any(Path(keep_in).iterdir()):
        raise errors.UserError(f"--out {keep_in} already holds files; give a new or empty folder")
    work = Path(keep_in) if keep_in else Path(tempfile.mkdtemp(prefix="amb-eval-"))
    # the evaluator a run of this process would score on (same isolation, same verdicts): under pytest the
    # session's warm one, not an interpreter, the track and its scorers started per command
    warm = warm_wanted(RunOptions(task=o["task"]), "warm" in reg.components["evaluator"])
    ticker = WaitTicker(err_console)  # scoring can take a while (report generation: METEOR's Java start-up)
    try:
        ticker.start(f"scoring {o['task']} in the isolated evaluator")
        try:
            result = evaluate_folder(reg, EvaluateOptions(
                task=o["task"], data_root=o["data_root"], work=work,
                submission=Path(submission) if submission else None, baseline=baseline, task_score=o["task_score"],
                eval_options=o["eval_options"], pictures=bool(keep_in) and o["pictures"],
                backend="warm" if warm else "process"))
        finally:
            ticker.stop()
        render(result, console, items=items)
        if submission and (note := staging_note(Path(submission), result.header, reg.task(o["task"])[1].demo)):
            console.print(f"[yellow]{escape(note)}[/]", soft_wrap=True)
        if keep_in:
            console.print(f"result: {work / 'result.json'}", soft_wrap=True)
            if "view" in main.list_commands(click.get_current_context()):  # the page is the campaign built-in's
                console.print(escape(f"page: automedbench view {shlex.quote(keep_in)} (each case with its reasons "
                                     "and picture)"), soft_wrap=True)
    finally:
        if not keep_in:
            shutil.rmtree(work, ignore_errors=True)


@main.command()
@click.argument("run")
@click.option("--runs", type=click.Path(file_okay=False), default="runs", show_default=True,
              help="Folder to look in when RUN is a run id.")
@click.option("--items", is_flag=True, help="Show every rubric item with rationale and evidence turns.")
@click.option("--json", "as_json", is_flag=True, help="Print the stored result.json.")
def show(run: str, runs: str, items: bool, as_json: bool) -> None:
    """Re-render a stored result (RUN is a run folder or a run id under --runs). A result the harness did
    not write, or whose evidence changed since (`automedbench verify`), is shown as unverified with why."""
    from .attempts import describe
    from .report import render
    from .resultproof import load_checked
    from .runfolder import RunFolder
    from .serialize import dumps

    folder = RunFolder.locate(run, Path(runs))
    result, found = load_checked(folder)
    if as_json:
        console.echo(json_terminal_safe(dumps(result)))
        if not found.genuine:
            err_console.print(f"[yellow]UNVERIFIED:[/] not verified as this harness's result: {escape(found.reason)}",
                              soft_wrap=True)
        return
    if not found.genuine:
        result.isolation.distrust(f"not verified as this harness's result: {found.reason}")
    render(result, console, items=items, command=True)
    if result.end_reason == errors.END_NO_AGENT:  # `evaluate --out`: "a run made before attempts were counted" misled
        console.print("attempt: none (outputs scored by `automedbench evaluate`; no agent ran)", soft_wrap=True)
    else:
        console.print(escape(describe(result.header.attempt)), soft_wrap=True)
    # where each grade's evidence is (per-case rows, pictures, the calls): the terminal shows grades, not cases
    page = folder.path / RunFolder.VIEW
    where = str(page) if page.is_file() else f"automedbench view {shlex.quote(str(folder.path))} writes it"
    console.print(escape(f"page: {where} (every grade with its evidence, each case's row and picture)"),
                  soft_wrap=True)


@main.command()
@click.argument("runs", nargs=-1, required=False)
@click.option("--runs-dir", type=click.Path(file_okay=False), default="runs", show_default=True,
              help="Folder to look in when a RUN is a run id.")
@click.option("--key", "keys", multiple=True, metavar="HEX|FILE",
              help="Also trust results signed by this public key (hex, or a file holding one key a line); "
                   "repeatable. This harness's own key, and those in its state folder's trusted_keys, are trusted.")
@click.option("--show-key", is_flag=True, help="Print this harness's public key (to publish) and exit.")
def verify(runs: tuple[str, ...], runs_dir: str, keys: tuple[str, ...], show_key: bool) -> None:
    """Say which stored results the harness genuinely wrote: one line per run, `genuine` or why not.

    RUN is a run folder, its result.json, a run id under --runs-dir, or a folder of runs. A result counts
    only with a proof this harness (or a key you trust) signed, for that run folder, with every byte and
    every evidence file (trajectory, verdict, evaluation, plan artefacts, tool output) as signed. Exit 0
    when every run is genuine, 1 when one is not (a result written before results were signed reads as not
    genuine: run it again to count it)."""
    from .resultproof import check_folder, public_key
    from .runfolder import RunFolder, find_runs

    if show_key:
        console.echo(public_key())
        return
    if not runs:
        raise errors.UserError("name at least one RUN (a run folder, a run id or a folder of runs), or --show-key")
    trusted = _trusted_keys(keys)
    folders: list[Path] = []
    for run in runs:
        path = Path(run)
        if path.is_dir() and not (path / RunFolder.RESULT).exists():
            inside = find_runs([path])
            if not inside:
                raise errors.UserError(f"{run}: not a run folder and no run folders under it")
            folders += inside
        else:
            folders.append(RunFolder.locate(run, Path(runs_dir)).path)
    bad = 0
    for path in folders:
        found = check_folder(path, extra_keys=trusted)
        if found.genuine:
            iso = (RunFolder(path).json_data(RunFolder.RESULT) or {}).get("isolation") or {}
            why = (iso.get("unverified") or ["see isolation.unverified"])[0] if iso.get("verified") is False else ""
            note = f"; an unverified run, counted only with --include-unverified: {why}" if why else ""
            console.print(f"{escape(str(path))}: genuine (signed by {found.key[:16]}...){escape(str(note)[:300])}",
                          soft_wrap=True)
        else:
            bad += 1
            console.print(f"{escape(str(path))}: [red]NOT GENUINE[/]: {escape(found.reason)}", soft_wrap=True)
    if bad:
        err_console.print(f"{bad} of {len(folders)} result(s) not genuine: they never count", soft_wrap=True)
        sys.exit(1)


def _trusted_keys(values: tuple[str, ...]) -> list[str]:
    """Public keys from --key: hex itself, or a file of them (one a line, `#` comments)."""
    import string

    found = []
    for value in values:
        words = ([value] if all(c in string.hexdigits for c in value) and len(value) == 64 else
                 [w.split("#", 1)[0].strip() for w in Path(value).read_text(errors="replace").splitlines()]
                 if Path(value).is_file() else None)
        if words is None:
            raise errors.UserError(f"--key {value[:80]!r}: neither a 64-digit hex public key nor a readable file")
        for word in filter(None, words):
            if len(word) != 64 or not all(c in string.hexdigits for c in word):
                raise errors.UserError(f"--key: {word[:80]!r} is not a 64-digit hex ed25519 public key")
            found.append(word.lower())
    return found


@main.command()
@click.argument("name", required=False)
def plugins(name: str | None) -> None:
    """List installed components (tracks, agents, sandboxes, judges, detectors, ...) and plugin commands.

    With NAME (e.g. `automedbench plugins codex`), only the components of that name, each with every option it
    takes (`--agent-option` / `--judge-option`)."""
    from rich.table import Table

    reg = registry()
    reg.tasks()
    commands = reg.commands(reserved=main.commands)
    every = [(kind, comps[key]) for kind, comps in [*reg.components.items(), ("command", commands)]
             for key in sorted(comps)]
    if name is not None:
        print_component(name, [c for _, c in every if c.name == name],
                        sorted({c.name for _, c in every}))
        print_problems(reg)
        return
    table = Table(show_header=True, header_style="bold")
    for col in ("Kind", "Name", "Distribution", "Version", "Description"):
        table.add_column(col)
    for kind, c in every:
        table.add_row(kind, c.name, c.distribution, c.version, described(c))
    console.print(table)
    print_problems(reg)


def print_component(name: str, found: list, known: list[str]) -> None:
    """`plugins NAME`: each component of that name, its distribution, description and options, a block each."""
    if not found:
        hint = install_hint("agent", name) or install_hint("track", name)
        raise errors.UserError(hint or f"no installed component is named {name!r}{errors.did_you_mean(name, known)}")
    for c in found:
        console.print(f"[bold]{c.kind} {escape(c.name)}[/] ({escape(c.distribution)} {escape(c.version)})")
        console.print("  " + escape(c.description), soft_wrap=True)
        if c.kind in ("agent", "judge"):
            options = component_options(c)
            flag = f"--{c.kind}-option"
            said = ("none" if options == [] else "checked by the component itself" if options is None
                    else ", ".join(f"{flag} {option}=..." for option in options))
            console.print(f"  options: {said}", soft_wrap=True)


def described(component) -> str:
    """A component's description, plus the options it takes that the description does not name: the listing is
    where a user finds an agent's or judge's options (replay's rewrite_paths= and allow_torn= were in no listing)."""
    names = component_options(component) if component.kind in ("agent", "judge") else None
    missing = [f"{name}=" for name in names or () if f"{name}=" not in component.description]
    return component.description + (f" (options: {', '.join(missing)})" if missing else "")


# Columns of `automedbench tasks` besides the id, in the order a narrow terminal keeps them, with the
# width each needs to stay readable; the id column itself is never wrapped or cut (it is what you type).
TASK_COLUMNS = [("Ready", 5), ("Cases", 5), ("Title", 18), ("Tiers", 17), ("Public labels", 13), ("Metric", 18),
                ("Data", 16)]
TASK_COLUMN_ORDER = ["Task", "Ready", "Title", "Tiers", "Cases", "Public labels", "Metric", "Data"]


def public_labels(spec) -> str:
    """Whether an agent on this task could fetch the labelled source itself (TaskSpec.public_source)."""
    if spec.demo:
        return "-"
    if not spec.public_source:
        return "no"
    return "yes, online" if spec.network else "yes (no network)"


def tasks_table(specs: list, width: int, ready: dict[str, bool] | None = None):
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
        ok = (ready or {}).get(spec.id, True)
        cells = {"Task": spec.id, "Ready": "yes" if ok else "[yellow]no[/]", "Title": spec.title,
                 "Tiers": ",".join(spec.tiers), "Cases": str(spec.case_count), "Public labels": public_labels(spec),
                 "Metric": spec.metric, "Data": "generated" if spec.demo else spec.dataset}
        table.add_row(*(cells[c] for c in columns))
    return table


def not_ready_lines(checked: dict[str, tuple[bool, str]]) -> list[tuple[str, str, list[str]]]:
    """The tasks not ready, one (first task, why, the track's other tasks with the same why) per track and
    reason (its demo first, the task to try first): a track missing one requirement printed one identical line
    for each of its tasks."""
    groups: dict[tuple[str, str], list[str]] = {}
    for task_id, (ok, why) in sorted(checked.items(), key=lambda item: (not item[0].endswith("/demo"), item[0])):
        if not ok:
            groups.setdefault((task_id.split("/", 1)[0], why), []).append(task_id)
    return [(ids[0], why, ids[1:]) for (_, why), ids in sorted(groups.items())]


def scoring_lines(found: dict) -> list[str]:
    """One line per track and set of programs its tasks' scoring runs (`Track.scoring_needs`), present or missing:
    a track whose scoring needed Java said so only while Java was missing."""
    from .taskcard import scoring_needs_said

    groups: dict[tuple[str, str], list[str]] = {}
    for task_id, (track, spec) in sorted(found.items()):
        said = scoring_needs_said(track.scoring_needs(spec))
        if said:
            groups.setdefault((track.name, said), []).append(task_id)
    return [f"scoring {name} here (a local evaluator) needs: {said} ({len(ids)} task(s)"
            + (f": {', '.join(ids)})" if len(ids) < len([t for t in found if t.startswith(name + "/")]) else ")")
            for (name, said), ids in sorted(groups.items())]


@main.command()
@click.argument("task", required=False)
@click.option("--data-root", type=click.Path(file_okay=False), default=None,
              help=f"Where staged data lives, to say which tasks are staged {DATA_ROOT_DEFAULT}.")
def tasks(task: str | None, data_root: str | None) -> None:
    """List every task with its tiers and case count, and whether this machine's local sandbox has what its
    method needs (Ready); then which tasks are staged under the data root (a demo stages itself on its first
    run; any other task once from its download, `automedbench stage TASK --from PATH`), what to install for the
    tasks that are not ready and the tracks not installed.

    With TASK (e.g. `automedbench tasks segmentation/demo`): that task's needs in full, its time and turn
    budget, the disk its workspace reserves, what its sandbox imports, network, the programs its scoring runs
    (present or missing, such as Java for METEOR), whether this machine is ready and where its data is.

    "Public labels: yes, online" marks a task whose labelled source anyone can fetch while its runs have
    network access: an agent could look the answers up (leaderboards can set such runs apart)."""
    from .needs import ready_here

    reg = registry()
    if task is not None:
        from .taskcard import task_card

        track, spec = reg.task(task)
        for line in task_card(track, spec, reg.distribution("track", track.name), data_root_or_default(data_root)):
            console.print(escape(line), soft_wrap=True)
        return
    found = reg.tasks()
    checked = {task_id: ready_here(track, spec, reg.distribution("track", track.name))
               for task_id, (track, spec) in found.items()}
    console.print(tasks_table([spec for _, spec in found.values()], console.width,
                              {task_id: ok for task_id, (ok, _) in checked.items()}))
    root = data_root_or_default(data_root)
    staged = sorted(t for t, (_, spec) in found.items() if (staging.task_dir(root, spec) / staging.STAMP).is_file())
    unstaged = sum(1 for _, spec in found.values() if not spec.demo and spec.id not in staged)
    console.print(escape(f"staged under {root}: {', '.join(staged) or 'none'}"
                         + (f"; not staged: {unstaged} dataset task(s), each staged once from its download before "
                            "it runs: automedbench stage TASK --from PATH" if unstaged else "")
                         + "; a demo stages itself on its first run"), soft_wrap=True)
    for line in scoring_lines(found):
        console.print(escape(line), soft_wrap=True)
    for first, why, rest in not_ready_lines(checked):
        console.print(f"not ready: {first}: {escape(why)}" + (f"; the same for {', '.join(rest)}" if rest else ""),
                      soft_wrap=True)
    for name, info in sorted(reg.missing_release_tracks().items()):
        ids = ", ".join(f"{name}/{t}" for t in info.get("tasks", []))
        broken = reg.broken_part("track", name)  # installed, but failed to load: a new install would not help
        console.print(escape(f"not loaded: {ids}: {broken}" if broken else
                             f"not installed: {ids}: pip install 'automedbench[{info['extra']}]'"), soft_wrap=True)
    print_problems(reg)


@main.command("stage")
@click.argument("task_id")
@click.option("--from", "source", type=click.Path(exists=True, file_okay=False), default=None,
              help="The dataset's official download folder (not needed for demo tasks).")
@click.option("--data-root", type=click.Path(file_okay=False), default=None,
              help=f"Where to write the staged task {DATA_ROOT_DEFAULT}.")
@click.option("--force", is_flag=True, help="Re-stage even if staged already.")
def stage_cmd(task_id: str, source: str | None, data_root: str | None, force: bool) -> None:
    """Turn a dataset download into public/ (agent-visible) and private/ (scorer-only) folders.

    A download holding fewer usable cases than the task stages (its sample, else its case count: a truncated or
    partial download) is refused in one line saying what it lacks, and nothing is staged.

    A staging that takes more than two seconds shows its progress on stderr (files, bytes and case folders
    written): one live line on a terminal, a line every 10 s otherwise (AUTOMEDBENCH_PROGRESS_S sets it)."""
    reg = registry()
    track, task = reg.task(task_id)
    if not task.demo and source is None:
        raise errors.UserError(f"{task_id} needs --from PATH (the dataset's download folder)")
    root = data_root_or_default(data_root)
    root.mkdir(parents=True, exist_ok=True)
    incoming = staging.task_dir(root, task) / INCOMING  # where the stager writes until its copy is complete
    with StagingProgress(task_id, incoming, task.case_count, err_console):  # on stderr, after 2 s
        staged = staging.stage(track, task, root, Path(source) if source else None, force=force)
    console.print(f"staged {len(staged.case_ids)} case(s) of {task_id} under {staged.root}")


if __name__ == "__main__":
    main()
