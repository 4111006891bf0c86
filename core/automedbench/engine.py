"""The engine's surface: what a built-in or a third-party distribution drives runs with, beside `automedbench.api`.

`automedbench.api` is what a component is written against (a track, agent, sandbox, judge, detector, model
backend). This module is what a feature that *drives or reads runs* needs of the engine: a sweep, a rejudge, a
warm evaluator service, a sandbox backend's evaluator container, a leaderboard, a test kit. The built-in
distributions (core/campaign, codes, docker, models, testkit) import the core through these two modules and
nothing else (tests/test_layering.py holds them to it), so a third party can write any of them as a plugin
and the core can reorganise everything not named in `__all__`.

What it holds, by step of a run:
- the run and its options: `Run`, `RunOptions` and the click helpers that declare run options on a command;
- the registry: `registry()` (the process-wide one), `Registry`, and `CommandContext` (what a plugin's
  command gets from the command line: consoles and the registry), `check_options` (a component's options
  refused by name before anything starts);
- staging: `stage`, `ensure_staged`, `default_data_root`, `task_dir`, `STAMP`; what a staging must hold to
  (`check_published`: the public tree's rule; `STAGING_SECRET_FILE`: where its secret is kept; `SEED_PARAM`:
  the parameter names a real task file may not carry); what a task's sandbox needs
  (`sandbox_gap`: the one line refusing a sandbox without it; `ready_here`: whether this machine has it);
- freezing and the evaluator: `freeze`, `evaluate` (one evaluation in this process), the request-based
  backend protocol (`EvalRequest`, `evaluate_in_process`, `serve_request`, the evaluator's environment,
  import path and limits), `evaluate_folder` with its `EvaluateOptions` (score a folder without an agent,
  as `automedbench evaluate`);
- grading and scoring: `grade_evaluation`, `GRADES_FILE`, `score_result` (one `ScoreInputs` record: the
  run's facts and how to read them), `run_rubric`, `judge_input`,
  `resolve_rubric` (a rubric settled for one run), `judged_stages` (S1–S3 from a verdict), `check_rubric`,
  `tag_codes`;
- the run folder and its rendering: `RunFolder`, `find_runs`, `MAX_RESULT_BYTES`, `render_result`, `render_brief`,
  `csv_cell`, `fmt_component` (a Task component as the terminal prints it), `with_unit` (beside its
  declared unit), `next_step` (what a user can do about
  a run by how it ended), `rerun_command` (the command line that makes a run like a stored one), `mask_value`
  (an option's value with no credential, as a header keeps it); the case pictures the evaluator draws into it
  (`PICTURES_DIR`, `PICTURE_INDEX`, their bounds,
  `copy_pictures` for an evaluator that drew them elsewhere) and the scripts kept beside (`SCRIPTS_DIR`);
  the result's proof that the harness wrote it (`write_result` signs, `check_folder`, `check_bytes`,
  `check_evidence` and `check_or_reason` check, `run_identity` names the run a result is a version of,
  `made_here` the attempts this machine counted per configuration (`attempts`); a
  command re-signing a run reads `copy_verified`'s copy and signs the digests it checked, adding what it writes
  with `write_verified`);
- what sandbox backends share: a folder only the harness can write (`HarnessDir`), the workspace quota
  (`mount_workspace`, `WorkspaceQuota`, `reap_stale_workspaces`), slirp networking (`SlirpNet`,
  `network_gaps`, `network_unsupported`, `SLIRP_DNS`), the harness's private state (`harness_key`,
  `state_dir`), the plan image reader;
- a sweep's progress on a terminal and off one (`SweepProgress`); the mark that opens the runner's notice
  under an answer repeated call after call (`REPEAT_NOTICE_MARK`);
- orderly interruption: `install_interrupt_handlers`, `interrupt_received`, `check_interrupt`,
  `rearm_interrupt`, `interrupt_exit_status`.

Names that pull in heavy packages (the runner's Jinja2 and click, rich) are loaded on first use.
"""

from __future__ import annotations

from typing import Any

from .attempts import made_here
from .detectors import tag_codes
from .evaluator import (
    EVAL_CPU_S,
    EVAL_FILE_BYTES,
    EVAL_MEMORY_MB,
    GRADES_FILE,
    EvalRequest,
    evaluate,
    evaluate_in_process,
    evaluator_env,
    evaluator_limits,
    evaluator_path,
    grade_evaluation,
    limited_command,
    request_exclude,
    serve_request,
    submission_failure,
)
from .freeze import freeze
from .fsutil import HarnessDir
from .harnessstate import harness_key, state_dir
from .interrupt import check as check_interrupt
from .interrupt import exit_status as interrupt_exit_status
from .interrupt import install as install_interrupt_handlers
from .interrupt import rearm as rearm_interrupt
from .interrupt import received as interrupt_received
from .needs import ready_here, sandbox_gap
from .nextstep import next_step
from .pictures import INDEX as PICTURE_INDEX
from .pictures import MAX_CASE_BYTES as MAX_PICTURE_BYTES
from .pictures import MAX_LEGEND_LABELS, PICTURES_DIR, copy_pictures
from .pictures import MAX_TEXT_CHARS as MAX_PICTURE_TEXT_CHARS
from .plan_artefacts import MAX_SCRIPT_BYTES, SCRIPTS_DIR
from .planimage import PlanImage, plan_reading, read_plan_png
from .plugins import CommandContext, Registry, check_options, registry
from .provenance import regraded_hashes
from .repeats import NOTICE_MARK as REPEAT_NOTICE_MARK
from .resultproof import (
    check_bytes,
    check_evidence,
    check_folder,
    check_or_reason,
    copy_verified,
    run_identity,
    write_result,
    write_verified,
)
from .rubric import check as check_rubric
from .rubric import resolve as resolve_rubric
from .runfolder import MAX_RESULT_BYTES, RunFolder, find_runs
from .sandboxes.netns import SLIRP_DNS, SlirpNet, network_gaps
from .sandboxes.netns import unsupported as network_unsupported
from .sandboxes.quota import WorkspaceQuota, mount_workspace, reap_stale_workspaces
from .scoring import ScoreInputs, judge_input, judged_stages, run_rubric, score_result
from .stagesecret import SECRET_FILE as STAGING_SECRET_FILE
from .staging import STAMP, check_published, default_data_root, stage, task_dir
from .staging import ensure as ensure_staged
from .taskfile import SEED_PARAM
from .verdictcaps import bound_verdict, graded

__all__ = [
    "DATA_ROOT_DEFAULT",  # noqa: F822
    "EVAL_CPU_S",
    "EVAL_FILE_BYTES",
    "EVAL_MEMORY_MB",
    "GRADES_FILE",
    "MAX_LEGEND_LABELS",
    "MAX_PICTURE_BYTES",
    "MAX_PICTURE_TEXT_CHARS",
    "MAX_RESULT_BYTES",
    "MAX_SCRIPT_BYTES",
    "PICTURES_DIR",
    "PICTURE_INDEX",
    "REPEAT_NOTICE_MARK",
    "SCRIPTS_DIR",
    "SEED_PARAM",
    "SLIRP_DNS",
    "STAGING_SECRET_FILE",
    "STAMP",
    "CommandContext",
    "EvalRequest",
    "EvaluateOptions",  # noqa: F822
    "HarnessDir",
    "PlanImage",
    "Registry",
    "Run",  # noqa: F822 (defined on first use by __getattr__ below)
    "RunFolder",
    "RunOptions",  # noqa: F822
    "ScoreInputs",
    "SlirpNet",
    "SweepProgress",  # noqa: F822
    "WorkspaceQuota",
    "bound_verdict",
    "check_bytes",
    "check_evidence",
    "check_folder",
    "check_interrupt",
    "check_options",
    "check_or_reason",
    "check_published",
    "check_rubric",
    "click_options",  # noqa: F822
    "copy_pictures",
    "copy_verified",
    "csv_cell",  # noqa: F822
    "data_root_or_default",  # noqa: F822
    "default_data_root",
    "ensure_staged",
    "evaluate",
    "evaluate_folder",  # noqa: F822
    "evaluate_in_process",
    "evaluator_env",
    "evaluator_limits",
    "evaluator_path",
    "find_runs",
    "fmt_component",  # noqa: F822
    "freeze",
    "from_cli",  # noqa: F822
    "grade_evaluation",
    "graded",
    "harness_key",
    "install_interrupt_handlers",
    "interrupt_exit_status",
    "interrupt_received",
    "judge_input",
    "judged_stages",
    "limited_command",
    "made_here",
    "mask_value",  # noqa: F822
    "mount_workspace",
    "network_gaps",
    "network_unsupported",
    "next_step",
    "parse_kv",  # noqa: F822
    "plan_reading",
    "python_repr",  # noqa: F822
    "read_plan_png",
    "ready_here",
    "reap_stale_workspaces",
    "rearm_interrupt",
    "registry",
    "regraded_hashes",
    "render_brief",  # noqa: F822
    "render_result",  # noqa: F822
    "request_exclude",
    "rerun_command",  # noqa: F822
    "resolve_rubric",
    "run_identity",
    "run_rubric",
    "sandbox_gap",
    "score_result",
    "serve_request",
    "stage",
    "state_dir",
    "submission_failure",
    "tag_codes",
    "task_dir",
    "with_unit",  # noqa: F822
    "write_result",
    "write_verified",
]


def __getattr__(name: str) -> Any:
    """The names whose modules pull in click, Jinja2 or rich, loaded when first asked for: the warm evaluator
    service and a sandbox backend import this module and need none of them."""
    if name == "Run":
        from .runner import Run

        return Run
    if name in ("RunOptions", "click_options", "DATA_ROOT_DEFAULT", "data_root_or_default", "from_cli", "parse_kv",
                "rerun_command", "mask_value"):
        from . import options

        return getattr(options, name)
    if name in ("render_brief", "python_repr"):
        from . import brief

        return getattr(brief, name)
    if name == "render_result":
        from .report import render

        return render
    if name in ("fmt_component", "with_unit"):
        from . import report

        return getattr(report, name)
    if name == "SweepProgress":
        from .progress import SweepProgress

        return SweepProgress
    if name == "csv_cell":
        from .terminal import csv_cell

        return csv_cell
    if name in ("evaluate_folder", "EvaluateOptions"):
        from . import evaluate_cmd

        return getattr(evaluate_cmd, name)
    raise AttributeError(f"module automedbench.engine has no attribute {name!r}")
