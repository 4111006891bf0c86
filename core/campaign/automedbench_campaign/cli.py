"""The campaign's commands (`sweep`, `codes`, `leaderboard`), registered through `automedbench_register_commands`
like a third party's; the engine's command line never imports them."""

from __future__ import annotations

import shlex
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import click
from automedbench.api import UserError
from automedbench.engine import CommandContext, click_options, from_cli, interrupt_exit_status, parse_kv
from rich.markup import escape


def _split(values: tuple[str, ...]) -> list[str]:
    """Accept `--agents a,b`, `--agents a --agents b` or both; keep order, drop repeats."""
    out: list[str] = []
    for value in values:
        out += [v.strip() for v in value.split(",") if v.strip() and v.strip() not in out]
    return out


@click.command()
@click.option("--agents", multiple=True, required=True, help="Agent names, comma-separated or repeated.")
@click.option("--tasks", multiple=True, required=True, help="Task ids, comma-separated or repeated.")
@click.option("--tiers", multiple=True, default=("lite",), show_default=True, help="Tiers, comma-separated.")
@click.option("--repeats", type=click.IntRange(1), default=1, show_default=True, help="Runs per cell.")
@click.option("--workers", type=click.IntRange(1), default=1, show_default=True,
              help="Runs at the same time (local processes, or Ray tasks in flight).")
@click.option("--executor", type=click.Choice(["local", "ray", "inline"]), default="local", show_default=True,
              help="local: process pool; ray: one Ray task per run (--ray-address to join a cluster); "
                   "inline: this process, one at a time.")
@click.option("--ray-address", default=None,
              help="Ray cluster address (default: start a local instance). The sweep joins it with the cluster's "
                   "token: RAY_AUTH_MODE=token, with RAY_AUTH_TOKEN or ~/.ray/auth_token (Ray sends none to a given "
                   "address in another mode). With none it could join only a cluster without token authentication, "
                   "so it is refused unless --ray-allow-no-auth. Whether a cluster checks the token it is given "
                   "cannot be told from here: start every node with RAY_AUTH_MODE=token.")
@click.option("--ray-allow-no-auth", is_flag=True,
              help="Accept Ray without token authentication: a local instance started under RAY_AUTH_MODE=disabled, "
                   "or a --ray-address cluster joined with no token (a process that reaches it, a sandboxed agent's "
                   "too, could join it as a node); refused without this flag.")
@click.option("--cpus-per-run", type=click.FloatRange(0), default=1.0, show_default=True,
              help="CPUs Ray reserves per run (a task's params.resources overrides).")
@click.option("--gpus-per-run", type=click.FloatRange(0), default=0.0, show_default=True,
              help="How many GPUs Ray reserves per run when scheduling it (a task's params.resources overrides); "
                   "which devices the run's sandbox sees is --gpus.")
@click.option("--retries", type=click.IntRange(0), default=2, show_default=True,
              help="Extra attempts for runs that end in infrastructure_failure (only those are retried).")
@click_options(
    "out", "sandbox", "judge", "agent_options", "judge_options", "data_root", "max_turns", "time_limit_s",
    "exec_timeout_s", "memory_mb", "task_score", "gpus", "eval_options", "require_isolation", "workspace_quota_mb",
    "warm_evaluator", "repeat_limit", "pictures",
    out={"help": "Folder of the runs and of the manifest sweep.json; rerun to resume."},
    sandbox={"help": "Sandbox backend for every run."},
    agent_options={"help": "Option passed to every agent factory; repeatable."},
    data_root={"help": "Staged data (on a cluster: a path every node sees)."},
    max_turns={"help": "Override each task's turn budget."},
    time_limit_s={"help": "Override each task's wall-clock budget (s)."},
    exec_timeout_s={"help": "Override each task's per-call timeout (s)."},
    task_score={"help": "strict or partial [default: the task's]."},
    gpus={"help": "GPU ids every run may use, e.g. 0 or 0,1 (CUDA_VISIBLE_DEVICES in each run's sandbox; none "
                  "by default). Not a reservation: with --executor ray, --gpus-per-run is what Ray reserves."},
    warm_evaluator={"default": True, "help": "Score each worker's runs with one evaluator process kept warm "
                    "(same isolation and scores; restarted after 50 evaluations or any failure), or a fresh one per "
                    "run."},
    require_isolation={"default": True,
                       "help": "Refuse runs whose sandbox cannot isolate the filesystem (local without bubblewrap)."},
)
@click.option("--dry-run", is_flag=True, help="Print what would run and what is already finished, then stop.")
@click.pass_obj
def sweep(context: CommandContext, agents, tasks, tiers, repeats, workers, executor, ray_address, ray_allow_no_auth,
          cpus_per_run, gpus_per_run, retries, dry_run, **fields) -> None:
    """Run the matrix agents × tasks × tiers × repeats; resumable (finished runs are skipped).

    Run ids are deterministic, so rerunning the same command continues where it stopped. Runs that end in
    infrastructure_failure are retried up to --retries times; agent failures count as results.
    """
    from automedbench.engine import SweepProgress
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from .sweep import Sweep, SweepConfig, validate
    from .viewer.page import num

    console, err_console = context.console, context.err_console
    reg = context.registry()
    context.print_problems(reg)
    config = SweepConfig.of(_split(agents), _split(tasks), _split(tiers), repeats=repeats, workers=workers,
                            executor=executor, retries=retries, cpus_per_run=cpus_per_run,
                            gpus_per_run=gpus_per_run, ray_address=ray_address,
                            ray_allow_no_auth=ray_allow_no_auth, **from_cli(fields))
    if dry_run:
        validate(config, reg)
        done, todo = Sweep(config, reg).plan()
        console.print(f"{len(done) + len(todo)} run(s): {len(done)} finished, {len(todo)} to run")
        for spec in todo[:50]:
            console.print(f"  {spec.run_id}")
        return
    live = err_console.is_terminal  # a terminal: the bar and the runs in flight; else one line per finished run
    bar = SweepProgress(TextColumn("[bold]sweep[/]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.fields[status]}"),
                        console=err_console, transient=False)
    state: dict[str, Any] = {"task": None, "failed": 0, "retries": 0, "done": 0, "todo": 0}
    unsubmitted: Counter[str] = Counter()  # scored runs that did not end in a submission, by how they ended

    def stop_bar() -> None:  # rich prints a newline on stop even if the bar never started
        if bar.live.is_started:
            bar.stop()

    def say(line: str) -> None:
        (bar.console if live else err_console).print(line, soft_wrap=True, highlight=False)

    def progress(event: dict[str, Any]) -> None:
        if event["kind"] == "start":  # the bar starts only now: a bad name or unstaged task stays one line
            err_console.print(f"{event['total']} run(s): {event['skipped']} already finished, {event['todo']} to run")
            state["todo"] = event["todo"]
            if live:
                bar.start()
                state["task"] = bar.add_task("sweep", total=event["todo"], status=f"cost ${event['cost_usd']:.2f}")
            return
        if event["kind"] == "note":
            say(escape(event["message"]))
            return
        if event["kind"] == "started":
            bar.in_flight[event["run_id"]] = time.monotonic()
            return
        bar.in_flight.pop(event["run_id"], None)
        if event.get("retry"):
            state["retries"] += 1
            state["todo"] += 1
            if live:
                bar.update(state["task"], total=bar.tasks[0].total + 1)
        elif event["state"] not in ("scored", "agent_failure"):
            state["failed"] += 1
        state["done"] += 1
        status = f"cost ${event['cost_usd']:.2f} · retried {state['retries']} · failed {state['failed']}"
        # how a scored run ended when not by a submission (time_limit, agent_stopped, ...): an F said no more
        ended = event.get("end_reason") or ""
        ended = "" if ended in ("", "submitted") or event["state"] != "scored" else ended
        if ended:
            unsubmitted[ended] += 1
        score = "–" if event.get("overall") is None else num(event["overall"])
        outcome = (f"{escape(event['run_id'])}  {event['state']}{f' ({ended})' if ended else ''}  Overall {score}"
                   f"{'  ' + escape(event['rating']) if event.get('rating') else ''}")
        if live:
            bar.update(state["task"], advance=1, status=status)
            if ended:  # above the bar: the runs that went well stay in it, the one that stopped short is named
                folder = shlex.quote(str(config.run.out / event["run_id"]))
                say(f"{outcome}: not submitted; automedbench show {escape(folder)} says why and what next")
        else:  # CI, nohup, a pipe: each finished run as it finishes (the unit of `run` and the leaderboard: 0-1)
            say(f"[{state['done']}/{state['todo']}] {outcome}  {event.get('wall_s') or 0:.1f}s"
                f"{'  (retrying)' if event.get('retry') else ''}  · {status}")
        if event["state"] == "infrastructure_failure":
            say(f"[yellow]{escape(event['run_id'])}[/]: infrastructure failure: " + escape(str(event.get("error"))))

    try:
        report = Sweep(config, reg, progress).run()
    except KeyboardInterrupt:
        stop_bar()
        err_console.print("interrupted: rerun the same command to resume")
        sys.exit(interrupt_exit_status())  # 130 on Ctrl-C, 143 on SIGTERM
    finally:
        stop_bar()
    states = ", ".join(f"{n} {s}" for s, n in sorted(report.states.items()))
    console.print(f"sweep: {report.total} run(s) ({report.skipped} skipped, {report.ran} executed, "
                  f"{report.retried} retried): {states}; cost ${report.cost_usd:.2f}; {report.wall_s:.1f}s")
    if unsubmitted:
        console.print("not submitted, scored as they stood: " + ", ".join(f"{n} {why}" for why, n in
                      sorted(unsubmitted.items())) + "; `automedbench show RUN` says why and what next for each")
    console.print(f"manifest: {report.manifest}")
    if report.states.get("scored") or report.states.get("agent_failure"):  # what a sweep is for: the comparison
        folder = shlex.quote(str(report.manifest.parent))
        console.print(escape(f"compare: automedbench leaderboard {folder} (--site DIR: linked pages per agent, "
                             "track, task and run)"), soft_wrap=True)
    lost = getattr(console, "lost", "") or getattr(err_console, "lost", "")
    if lost:  # `| head`, a closed terminal: what it did not show is in the manifest and the run folders
        err_console.print(escape(f"the output stopped: {lost}; the sweep went on to its end: {report.manifest} "
                                 "lists every run"), soft_wrap=True)
    if report.states.get("infrastructure_failure"):
        sys.exit(3)


@click.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--tagger", default=None, metavar="JUDGE",
              help="Also ask this judge backend (one with complete(system, prompt)) to tag the runs.")
@click.option("--tagger-option", "tagger_options", multiple=True, metavar="KEY=VALUE",
              help="Option for the --tagger judge, e.g. model=NAME or base_url=URL; repeatable.")
@click.option("--dry-run", is_flag=True, help="Show the codes but do not rewrite result.json.")
@click.option("--include-unverified", is_flag=True,
              help="Also tag unverified runs (no filesystem isolation...: their trajectories are not trusted).")
@click.pass_obj
def codes(context: CommandContext, runs, tagger, tagger_options, dry_run, include_unverified) -> None:
    """(Re)tag stored runs with error codes E1–E5; RUNS are run folders or folders of runs.

    Codes are diagnostic only: scores are never changed. Harness codes (H-BREACH, ...) are kept. A run the
    harness did not write, or whose evidence changed since it was signed, is left out with the reason
    (`automedbench verify`); a re-tagged result is signed again.
    """
    from automedbench.engine import RunFolder, copy_verified

    from .store import find_runs
    from .tagger import tagger_from_registry

    console = context.console
    reg = context.registry()
    llm = tagger_from_registry(reg, tagger, parse_kv(tagger_options)) if tagger else None
    found = find_runs(Path(r) for r in runs)
    if not found:
        raise UserError("no run folders (with result.json) under " + ", ".join(runs))
    outputs: dict[str, list[str]] = {}
    for run_dir in found:
        with tempfile.TemporaryDirectory(prefix="automedbench-codes-") as private:
            # tagged from a verified copy, and signed as verified: the folder may change while a tagger model answers
            verified = copy_verified(RunFolder(run_dir), Path(private))
            if isinstance(verified, str):
                console.print(f"{escape(run_dir.name)}: [red]left out (not verified as the harness's: "
                              f"{escape(verified)})[/]", soft_wrap=True)
                continue
            _tag_one(context, reg, run_dir, verified, outputs, llm, include_unverified, dry_run)


def _tag_one(context: Any, reg: Any, run_dir: Path, verified: tuple[Any, dict[str, str]],
             outputs: dict[str, list[str]], llm: Any, include_unverified: bool, dry_run: bool) -> None:
    """Tag one run from its verified copy; its result is signed with the evidence digests the copy was checked
    against."""
    from automedbench.engine import RunFolder, tag_codes, write_result

    console = context.console
    copy, files = verified
    result = copy.load_result()
    if not result.isolation.verified and not include_unverified:
        console.print(f"{run_dir.name}: [yellow]left out (unverified; --include-unverified to tag it)[/]")
        return
    if result.header.task not in outputs:
        try:
            outputs[result.header.task] = list(reg.task(result.header.task)[1].output_files)
        except UserError:
            outputs[result.header.task] = []
    fired = tag_codes(result, copy.path, reg, outputs[result.header.task], llm)
    if fired is None:  # no tagging step installed (automedbench-codes comes with the campaign)
        raise UserError("no error-code tagging step is installed (it comes with automedbench-codes): "
                        "pip install 'automedbench[codes]'")
    if not dry_run:
        unsigned = write_result(RunFolder(run_dir), result, files=files)
        if unsigned:
            console.print(f"{escape(run_dir.name)}: [red]{escape(unsigned)}[/]", soft_wrap=True)
    label = ", ".join(f"{c.code}" for c in fired) or "none"
    console.print(f"{run_dir.name}: {label}")
    for c in fired:
        turns = f" (turns {', '.join(map(str, c.evidence_turns))})" if c.evidence_turns else ""
        console.print(f"    [dim]{c.code} {escape(c.source)}: {escape(c.message + turns)}[/]")


@click.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--by", default="agent,task_id,tier", show_default=True,
              help="Grouping keys, from agent, task_id, track, tier (e.g. --by agent for one row per agent).")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), default=None, help="Write the rows as CSV.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              help="Write rows and analyses as JSON.")
@click.option("--html", "html_path", type=click.Path(dir_okay=False), default=None,
              help="Write a static HTML report with plots.")
@click.option("--site", "site_dir", type=click.Path(file_okay=False), default=None,
              help="Write a folder of linked offline pages: ranking, tracks, tasks, Lite vs Standard, stage "
                   "profile, error codes and every run's own page.")
@click.option("--resamples", type=click.IntRange(100), default=2000, show_default=True, help="Bootstrap resamples.")
@click.option("--seed", type=int, default=0, show_default=True, help="Bootstrap seed (same seed, same CIs).")
@click.option("--quiet", is_flag=True, help="No terminal table.")
@click.option("--include-unverified", is_flag=True,
              help="Count unverified runs too (no filesystem isolation...: not trusted scores); left out by default.")
@click.option("--pictures/--no-pictures", default=True, show_default=True,
              help="With --site: each run page shows its cases' pictures (drawn from the data); --no-pictures "
                   "leaves them out, for a site published where the datasets' licences allow no images.")
@click.option("--public-sources", type=click.Choice(["include", "exclude", "only"]), default="include",
              show_default=True,
              help="Runs of tasks whose labelled source is public and that had network access (the agent could "
                   "fetch the answers; `automedbench tasks`, column Public labels): count them, leave them out, "
                   "or count only them.")
@click.pass_obj
def leaderboard(context: CommandContext, runs, by, csv_path, json_path, html_path, site_dir, resamples, seed, quiet,
                include_unverified, pictures, public_sources) -> None:
    """Leaderboard over stored runs (folders of runs) with bootstrap CIs and the paper's analyses."""
    import json

    from automedbench.api import atomic_write_text

    from .htmlreport import render_html
    from .leaderboard import GROUP_KEYS, build, to_json
    from .render import render_terminal, to_csv
    from .store import load_table

    console = context.console
    keys = tuple(k.strip() for k in by.split(",") if k.strip())
    bad = [k for k in keys if k not in GROUP_KEYS]
    if bad or not keys:
        raise UserError(f"--by {by!r}: choose keys from {', '.join(GROUP_KEYS)}")
    table = load_table(Path(r) for r in runs)
    if public_sources != "include":
        table = table.select(table["public_source"] == (public_sources == "only"))
    if not len(table) and not table.rejected:
        raise UserError("no run folders (with result.json) under " + ", ".join(runs)
                        + ("" if public_sources == "include" else f" (--public-sources {public_sources})"))
    board = build(table, by=keys, resamples=resamples, seed=seed, include_unverified=include_unverified)
    if not include_unverified:  # the HTML report's per-run plots show the same runs as the board
        table = table.select(table["verified"])
    if not quiet:
        render_terminal(board, console)
    # reports are meant to be shared: the file mode a plain open() would give, not mkstemp's 0600
    if csv_path:
        atomic_write_text(Path(csv_path), to_csv(board), shared=True)
    if json_path:
        atomic_write_text(Path(json_path), json.dumps(to_json(board), indent=1) + "\n", shared=True)
    if html_path:
        atomic_write_text(Path(html_path), render_html(board, table), shared=True)
    if site_dir:
        from .site import write_site

        write_site(table, Path(site_dir), resamples=resamples, seed=seed, pictures=pictures)
    for label, path in (("csv", csv_path), ("json", json_path), ("html", html_path),
                        ("site", site_dir and str(Path(site_dir) / "index.html"))):
        if path:
            console.print(f"{label}: {path}")


def register(cli: click.Group) -> None:
    for command in (sweep, codes, leaderboard):
        cli.add_command(command)
