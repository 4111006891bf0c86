"""`automedbench validate-task`: what a track author runs before publishing a task (and `check_track` in tests)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import click
from automedbench.api import ASSETS_MOUNT, CONDITIONS, TIERS
from automedbench.engine import (
    DATA_ROOT_DEFAULT,
    CommandContext,
    Registry,
    check_rubric,
    ensure_staged,
    python_repr,
    ready_here,
    render_brief,
)
from rich.console import Console


def validate(reg: Registry, task_id: str, data_root: Path, console: Console) -> bool:
    from automedbench.engine import EvaluateOptions, evaluate_folder

    failures = 0

    def check(ok: bool, what: str, detail: str = "") -> None:
        nonlocal failures
        failures += 0 if ok else 1
        mark = "[green]ok[/]  " if ok else "[red]FAIL[/]"
        console.print(f"{mark} {what}" + (f" — {detail}" if detail else ""))

    track, task = reg.task(task_id)
    # a missing data root or an unstaged real task is a user error (exit 2, one line), as for `run`
    staged = ensure_staged(track, task, data_root)
    check(True, f"task file parses: {task.id} ({task.case_count} cases, tiers {', '.join(task.tiers)})")
    try:
        check(len(staged.case_ids) == task.case_count, "staged case count matches the task file",
              f"{len(staged.case_ids)} staged, {task.case_count} declared")
        leaked = sorted(p.name for p in staged.public.rglob("*") if p.is_file()
                        and any(p.name == q.name for q in staged.private.rglob("*") if q.is_file()))
        check(not leaked, "no reference file name appears in public/", ", ".join(leaked[:5]))
    except Exception as exc:
        check(False, "staging", str(exc))
        return False
    for tier in TIERS:
        if tier not in task.tiers:
            continue
        try:
            text = render_brief(task, tier, track.template_dir(), data_dir="/data/public",
                                workspace_dir="/workspace", case_ids=staged.case_ids,
                                extra={"assets_dir": ASSETS_MOUNT if track.assets(task) is not None else ""})
            check("{{" not in text and "{%" not in text, f"brief renders at {tier}", f"{len(text)} characters")
            leaked = python_repr(text)
            check(not leaked, f"brief at {tier} holds no Python repr", leaked or "clean")
        except Exception as exc:
            check(False, f"brief renders at {tier}", str(exc))
    ready, why = ready_here(track, task)
    needs = track.sandbox_needs(task)
    check(ready, "the local sandbox's Python has what the task's method needs",
          why or (", ".join(needs.modules) or "no modules declared")
          + ("; no weights to obtain" if not needs.weights else ""))
    rubric = track.rubric(task)
    problems = check_rubric(rubric, list(task.tiers), [*CONDITIONS, *track.rubric_conditions(task)])
    check(not problems, "rubric declaration is sound", "; ".join(problems) or
          f"{len(rubric.items)} items, " + ", ".join(f"{r.stage} {r.text}" for r in rubric.stages))
    baselines = track.baselines()
    trivial = track.trivial_baselines()
    # every baseline is evaluated: one evaluator kept warm between them where a plugin offers one (the same
    # verdicts, without starting the interpreter, the track and its scorers, e.g. METEOR's JVM, each time)
    backend = "warm" if "warm" in reg.components["evaluator"] else "process"
    with tempfile.TemporaryDirectory(prefix="amb-validate-") as tmp:
        for name in baselines:
            try:
                result = evaluate_folder(reg, EvaluateOptions(task=task_id, baseline=name, data_root=data_root,
                                                              work=Path(tmp) / name, backend=backend))
                strict = result.task.strict if result.task else None
                shown = "null" if strict is None else f"{strict:.3f}"  # not 0.01908752961900258
                if name == "perfect":
                    check(strict == 1.0 and result.aggregate.rating == "A", "perfect baseline scores 1.0 / A",
                          f"strict {shown}, rating {result.aggregate.rating}")
                else:
                    check(result.task is not None, f"baseline {name} evaluates", f"strict {shown}")
                letter = result.aggregate.rating
                if name == "empty":  # an empty output rates F in every track: no case agrees with a reference
                    check(letter == "F", "empty baseline rates F", f"rating {letter}: {result.aggregate.rating_reason}")
                elif name in trivial or name == "constant":  # a track cannot excuse its constant from the check
                    check(letter not in ("A", "B"), f"trivial baseline {name} rates C or F",
                          f"rating {letter}: {result.aggregate.rating_reason}")
            except Exception as exc:
                check(False, f"baseline {name}", str(exc))
    missing = [n for n in ("perfect", "empty", "constant", *trivial) if n not in baselines]
    check(not missing, "track offers perfect, empty, constant and its trivial baselines", ", ".join(missing))
    console.print(f"{'[green]valid[/]' if not failures else f'[red]{failures} problem(s)[/]'}: {task_id}")
    return failures == 0


@click.command("validate-task")
@click.argument("task_id")
@click.option("--data-root", type=click.Path(file_okay=False), default=None,
              help=f"Where staged data lives {DATA_ROOT_DEFAULT}.")
@click.pass_obj
def validate_task(context: CommandContext, task_id: str, data_root: str | None) -> None:
    """Checks for track authors: task file, staging, briefs for every tier, rubric, baselines."""
    from automedbench.engine import data_root_or_default

    ok = validate(context.registry(), task_id, data_root_or_default(data_root), context.console)
    sys.exit(0 if ok else 1)
