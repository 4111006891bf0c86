"""`automedbench tasks TASK`: one task's needs in full before a run, its budget (time, turns, per call), the disk its
workspace reserves, what its sandbox must import, network, the programs its scoring runs (present or missing),
whether this machine is ready and where its data is.
The listing's narrow columns held none of the budget or disk, and cut the rest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import staging
from .needs import install_line, ready_here
from .records import ScoringNeed, TaskSpec


def scoring_needs_said(needs: tuple[ScoringNeed, ...], said: str = "") -> str:
    """Each program a task's scoring runs, present (where) or missing (with its fix, unless `said` already holds it:
    the card's "ready here" line names the first missing one's)."""
    return "; ".join(f"{need.what}: " + (f"present ({need.found})" if need.found else
                                         "missing" if need.gap == said else f"missing ({need.gap})") for need in needs)


def task_card(track: Any, spec: TaskSpec, distribution: str, data_root: Path) -> list[str]:
    """The lines `tasks TASK` prints for `spec` (plain text: the caller escapes nothing it did not write)."""
    needs = track.sandbox_needs(spec)
    ready, why = ready_here(track, spec, distribution)
    counted = "model replies excluded" if spec.time_limit_counts == "tools" else "every second from the first turn"
    modules = (f"{', '.join(needs.modules)} ({install_line(spec, needs)})" if needs.modules
               else "no declared module")
    staged = (staging.task_dir(data_root, spec) / staging.STAMP).is_file()
    if staged:
        data = f"staged under {data_root}"
    elif spec.demo:
        data = "generated and staged on its first run (no download)"
    else:
        data = staging.unstaged(spec, data_root)
    scoring = scoring_needs_said(track.scoring_needs(spec), why)
    return [
        f"{spec.id}: {spec.title}",
        f"  cases {spec.case_count}; tiers {', '.join(spec.tiers)}; metric: {spec.metric}",
        f"  time: {spec.time_limit_s} s per run ({counted}), {spec.max_turns} turns, {spec.exec_timeout_s} s per "
        "call (--time-limit, --max-turns, --exec-timeout change them)",
        f"  disk: a {spec.workspace_mb} MB workspace, reserved whole before the run starts (--workspace-quota-mb)",
        f"  sandbox: imports {modules}; model weights: {'needed' if needs.weights else 'none'}; network: "
        + ("yes (its labelled source is public online)" if spec.network and spec.public_source
           else "yes" if spec.network else "none"),
        *([f"  scoring here (a local evaluator; the docker one brings its own) needs: {scoring}"] if scoring else []),
        f"  ready here: {'yes' if ready else 'no: ' + why}",
        f"  data: {data}",
    ]
