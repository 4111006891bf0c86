"""The campaign's judge commands: `rejudge` (re-grade stored runs with another judge) and `judge-agreement`
(how far two judges agree over a set of runs), registered through `automedbench_register_commands`."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import click
from automedbench.api import UserError
from automedbench.engine import CommandContext, check_options, parse_kv
from rich.markup import escape


def _track(items, label: str, err_console):
    """Iterate with a transient progress bar on stderr (judging many runs with an LLM takes minutes)."""
    from rich.progress import track

    return track(items, description=label, console=err_console, transient=True,
                 disable=len(items) < 2 or not err_console.is_terminal)


def _folders(runs: tuple[str, ...], runs_dir: str) -> list[Any]:
    """The run folders a user named: a run folder, its result.json, a run id under `runs_dir`, or a folder of runs
    (a sweep's, as `leaderboard`, `codes` and `verify` take), each run once."""
    from automedbench.engine import RunFolder, find_runs

    folders: dict[str, Any] = {}
    for run in runs:
        path = Path(run)
        if path.is_dir() and not (path / RunFolder.RESULT).is_file():
            inside = find_runs([path])
            if inside:
                folders.update((str(p.resolve()), RunFolder(p)) for p in inside)
                continue
        folder = RunFolder.locate(run, Path(runs_dir))
        folders.setdefault(str(folder.path.resolve()), folder)
    return list(folders.values())


@click.command()
@click.argument("runs", nargs=-1, required=True)
@click.option("--judge", required=True, help="Judge backend to re-grade with (rules, openai, anthropic, ...).")
@click.option("--judge-option", "judge_options", multiple=True, metavar="KEY=VALUE",
              help="Option for the judge, e.g. model=gpt-4o or config=agents.yaml entry=NAME; repeatable.")
@click.option("--runs-dir", type=click.Path(file_okay=False), default="runs", show_default=True,
              help="Folder to look in when a RUN is a run id (a RUN may also be a run folder or a folder of runs).")
@click.option("--items", is_flag=True, help="Show every rubric item of each re-graded run.")
@click.pass_obj
def rejudge(context: CommandContext, runs: tuple[str, ...], judge: str, judge_options, runs_dir: str,
            items: bool) -> None:
    """Re-grade stored runs (run folders, run ids or folders of runs): new S1–S3 verdicts, stages and aggregate
    recomputed, result.json rewritten atomically and signed again; the previous verdict is kept as
    judge.<old-judge>.<timestamp>.json. A run the harness did not write, or whose trajectory, verdict or
    evaluation changed since, is refused (`automedbench verify` says why) before any run is rewritten. A run the
    new judge cannot grade (endpoint down, unknown model, invalid replies) is left as it was, and the command ends
    with exit 1."""
    from automedbench.engine import render_result as render

    from .rejudge import NotRegraded, check_genuine
    from .rejudge import rejudge as regrade

    console, err_console = context.console, context.err_console
    reg = context.registry()
    context.print_problems(reg)
    folders = _folders(runs, runs_dir)
    for folder in folders:  # every run checked before the first result.json is rewritten
        folder.check_trajectory()
        check_genuine(folder)  # the harness wrote it and its evidence is as signed: re-signed only then
    failed: list[str] = []
    for folder in folders:
        try:
            result = regrade(reg, folder, judge, parse_kv(judge_options))
        except NotRegraded as exc:  # the run keeps its grade; the others are still re-graded
            err_console.print(f"[red]{escape(str(exc))}[/]")
            failed.append(str(exc))
            continue
        render(result, console, items=items)
        cost = result.runtime.judge_cost_usd
        label = _side_label(judge, [result.judge] if result.judge is not None else [])
        console.print(escape(f"re-graded {folder} with {label}") + (f" (judge cost ${cost:.4f})" if cost else ""),
                      soft_wrap=True)
    if failed:
        err_console.print(f"{len(failed)} of {len(folders)} run(s) not re-graded (left as they were). Next: check the "
                          f"judge's model, base_url and key (`automedbench plugins {escape(judge)}` lists its "
                          "options), then run the same rejudge command on them again."
                          + (" A judge that timed out may only be slow: a longer --judge-option timeout_s= lets it "
                             "answer." if any("timed out" in why.lower() for why in failed) else ""))
        raise SystemExit(1)


@click.command("judge-agreement")
@click.argument("runs", nargs=-1, required=True)
@click.option("--judge-a", required=True, help="First judge (a stored verdict by it is used when present).")
@click.option("--judge-b", required=True, help="Second judge.")
@click.option("--judge-a-option", "a_options", multiple=True, metavar="KEY=VALUE",
              help="Option for the first judge, e.g. model=gpt-4o or base_url=URL; repeatable.")
@click.option("--judge-b-option", "b_options", multiple=True, metavar="KEY=VALUE",
              help="Option for the second judge; repeatable. Two models of one backend (--judge-a openai "
                   "--judge-b openai, other options) are both graded now: a stored verdict names its backend, not "
                   "the options it ran with.")
@click.option("--regrade", is_flag=True, help="Grade with both judges now even when stored verdicts exist.")
@click.option("--stored-only", is_flag=True, help="Use stored verdicts only; skip runs that lack one.")
@click.option("--runs-dir", type=click.Path(file_okay=False), default="runs", show_default=True,
              help="Folder to look in when a RUN is a run id (a RUN may also be a run folder or a folder of runs).")
@click.option("--json", "as_json", is_flag=True, help="Print the agreement table as JSON.")
@click.pass_obj
def judge_agreement(context: CommandContext, runs, judge_a, judge_b, a_options, b_options, regrade, stored_only,
                    runs_dir, as_json) -> None:
    """Per-item agreement and Cohen's kappa between two judges over a set of runs (run folders, run ids or
    folders of runs, e.g. a sweep's); nothing is rewritten."""
    import json

    from automedbench.api import to_dict
    from automedbench.engine import copy_verified, run_identity
    from rich.table import Table

    from .rejudge import agreement

    if stored_only and regrade:
        raise UserError("--stored-only and --regrade exclude each other")
    sides = ((judge_a, parse_kv(a_options)), (judge_b, parse_kv(b_options)))
    # one backend under two sets of options (two models): its stored verdicts cannot tell the sides apart
    one_backend = judge_a == judge_b and sides[0][1] != sides[1][1]
    if one_backend and stored_only:
        raise UserError(f"--judge-a and --judge-b are both {judge_a} with other options: a stored verdict does not "
                        "say which options graded it; leave out --stored-only to grade both now")
    console, err_console = context.console, context.err_console
    reg = context.registry()
    for (name, options), flag in zip(sides, ("--judge-a-option", "--judge-b-option"), strict=True):
        check_options(reg.get("judge", name), options, flag)  # a mistyped name or option: one line, before grading
    judges: dict[tuple[str, str], Any] = {}
    pairs, skipped, reasons, left_out = [], [], {}, {}
    counted: dict[tuple[str, str], str] = {}  # (run id, signed trajectory) -> the folder that counted it
    once: dict[str, str] = {}  # folder -> the folder its run counted in (a copy, or a version graded again)
    for folder in _track(_folders(runs, runs_dir), "grading", err_console):
        with tempfile.TemporaryDirectory(prefix="automedbench-agreement-") as private:
            # graded and read from a verified copy: a run the harness did not write, or whose verdict, trajectory
            # or evaluation was edited, would set the figures published about the judges
            found = copy_verified(folder, Path(private))
            if isinstance(found, str):
                left_out[str(folder)] = found
                continue
            copy, signed = found
            # one run kept in two folders (copied, or re-graded in one and not the other) is one run: counted
            # twice, its items would weigh double in the figures, as the leaderboard already refuses
            run = run_identity(copy.load_result().header.run_id, signed)
            if run is not None and run in counted:
                once[str(folder)] = counted[run]
                continue
            pair = _pair(reg, copy, sides, judges, regrade or one_backend, stored_only, reasons, str(folder))
        if None in pair:  # not counted here: another folder of the run may give both verdicts
            skipped.append(str(folder))
        else:
            if run is not None:
                counted[run] = str(folder)
            pairs.append((pair[0], pair[1]))
    items, pooled = agreement(pairs)
    if as_json:
        console.echo(json.dumps({"judge_a": judge_a, "judge_b": judge_b, "runs": len(pairs), "skipped": skipped,
                                 "versions_a": sorted({p[0].judge_version for p in pairs}),
                                 "versions_b": sorted({p[1].judge_version for p in pairs}),
                                 "left_out": [{"run": run, "reason": why} for run, why in left_out.items()],
                                 "counted_once": [{"run": run, "counted_at": at} for run, at in once.items()],
                                 "items": [to_dict(i) for i in items], "pooled": to_dict(pooled)}, indent=2))
        if not pairs:
            _nothing_compared(err_console, judge_a, judge_b, skipped, left_out, as_json=True)
        return
    table = Table(show_header=True, header_style="bold")
    for col in ("Item", "Runs", "Agreement", "Cohen's kappa"):
        table.add_column(col)
    for row in [*items, pooled]:
        table.add_row(row.item, str(row.n), "-" if row.agreement is None else f"{row.agreement:.3f}",
                      "undefined" if row.kappa is None else f"{row.kappa:.3f}")
    label_a, label_b = (_side_label(name, [p[side] for p in pairs]) for side, name in enumerate((judge_a, judge_b)))
    console.print(f"{escape(label_a)} vs {escape(label_b)} over {len(pairs)} run(s)" + (
        f"; {len(left_out)} left out, not verified as the harness's (`automedbench verify` says why)"
        if left_out else "") + (f"; {len(once)} counted once, another folder of a run already counted" if once else ""))
    console.print(table)
    for folder, why in left_out.items():
        err_console.print(f"[red]left out[/] {escape(folder)}: not verified as the harness's: {escape(why)}",
                          soft_wrap=True)
    for folder, at in once.items():
        err_console.print(f"[yellow]counted once[/] {escape(folder)}: the same run as {escape(at)}", soft_wrap=True)
    for folder in skipped:
        reason = reasons.get(folder, "no usable verdict from one of the judges")
        err_console.print(f"[yellow]skipped[/] {escape(folder)}: {escape(reason)}", soft_wrap=True)
    if not pairs:
        _nothing_compared(err_console, judge_a, judge_b, skipped, left_out)


def _nothing_compared(err_console: Any, judge_a: str, judge_b: str, skipped: list[str],
                      left_out: dict[str, str], as_json: bool = False) -> None:
    """No run graded by both judges: an empty table of undefined kappas exited 0, and a script took it for an
    agreement measured."""
    why = ("every run skipped" if skipped else
           "every run left out, not verified as the harness's" if left_out else "no run found")
    where = ("the JSON's skipped and left_out name the runs (without --json, each with why)" if as_json else
             "fix what the lines above name, then run the same command again")
    err_console.print(f"[red]no agreement measured:[/] no run has verdicts by both {escape(judge_a)} and "
                      f"{escape(judge_b)} ({why}); {where}", soft_wrap=True)
    raise SystemExit(1)


def _pair(reg: Any, copy: Any, sides, judges: dict[tuple[str, str], Any], grade_now: bool, stored_only: bool,
          reasons: dict[str, str], name: str) -> list[Any]:
    """Both judges' verdicts on one verified run copy (None for a side with no usable one). A stored verdict is the
    signed judge.json only: an archived judge.<name>.*.json is outside the proof, anyone could have edited it."""
    from .rejudge import grade, stored_verdict

    result = copy.load_result()
    pair = []
    for judge_name, options in sides:
        verdict = None if grade_now else stored_verdict(copy, judge_name)
        if verdict is None and stored_only and not grade_now:
            reasons.setdefault(name, f"no signed {judge_name} verdict (judge.json); an archived one is not signed, "
                                     "leave out --stored-only to grade it now")
        if verdict is None and not stored_only and not result.isolation.breached:
            key = (judge_name, repr(sorted(options.items())))  # each side its own judge, made once
            if key not in judges:
                judges[key] = reg.create("judge", judge_name, **options)
            try:
                verdict = grade(reg, copy, result, judges[key])
            except UserError as exc:  # e.g. a torn trajectory: skip this run, keep the others
                reasons[name] = str(exc)
                verdict = None
            if verdict is not None and verdict.error:  # said with the run: "no usable verdict" named no judge
                reasons.setdefault(name, f"the {judge_name} judge could not grade it: {verdict.error}")
                verdict = None
        pair.append(verdict)
    return pair


def _side_label(name: str, verdicts: list[Any]) -> str:
    """A judge as its verdicts name it, with the version (an LLM judge's model): two models of one backend were
    headed "openai vs openai", and the table did not say which model was which."""
    versions = sorted({v.judge_version for v in verdicts if v.judge_version})
    return f"{name} (version {', '.join(versions)})" if versions else name


def register(cli: click.Group) -> None:
    for command in (rejudge, judge_agreement):
        cli.add_command(command)
