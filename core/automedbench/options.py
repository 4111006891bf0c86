"""The run configuration, declared once: each `RunOptions` field carries its command-line flag, help text,
parser and whether it changes a score (then it enters the header's options hash).

`run`, `evaluate` and `sweep` build their options from these declarations (`click_options`), so a new
field reaches every command that exposes it, and the hash covers every score-changing field by construction.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import click
from attrs import define, field

from .errors import UserError
from .repeats import DEFAULT_LIMIT as DEFAULT_REPEAT_LIMIT
from .repeats import NOTICE_AT as REPEAT_NOTICE_AT
from .sandbox import DEFAULT_QUOTA_MB
from .secretmask import mask_value
from .serialize import json_text, to_dict

META = "automedbench"  # the attrs metadata key of a field's declaration
# =0: runs that do not say warm or cold score on a fresh evaluator process per evaluation; unset (or =1), on the
# warm evaluator where it is installed: one process serves a run's pilot check and its evaluation (and later runs
# of the same process)
WARM_EVALUATOR_ENV = "AUTOMEDBENCH_WARM_EVALUATOR"


def parse_kv(pairs: tuple[str, ...] | list[str]) -> dict[str, str]:
    """`KEY=VALUE` strings (a repeatable option) into a dict; anything else is one clear line."""
    out: dict[str, str] = {}
    for pair in pairs:
        if "=" not in pair:
            raise UserError(f"option {pair!r} must look like KEY=VALUE")
        key, value = pair.split("=", 1)
        out[key.strip()] = value
    return out


def _path(value: str | None) -> Path | None:
    return None if value is None else Path(value).expanduser()


def gpu_ids(value: str | None) -> str:
    """`--gpus`: comma-separated device indices or CUDA UUIDs (`GPU-…`, `MIG-…`); anything else (`all`, `0;1`)
    was handed to CUDA_VISIBLE_DEVICES as it stood, a run without the GPU it asked for, silently."""
    import re

    ids = [part.strip() for part in (value or "").split(",") if part.strip()]
    bad = [part for part in ids if not re.fullmatch(r"\d+|(GPU|MIG)-[0-9A-Za-z/-]+", part)]
    if bad:
        raise UserError(f"--gpus takes device ids separated by commas, e.g. 0 or 0,1 (or GPU-/MIG- UUIDs), not "
                        f"{bad[0]!r}; leave it out for no GPU")
    return ",".join(ids)


# Every command's --data-root help says where the default comes from, in these words.
DATA_ROOT_DEFAULT = "[default: $AUTOMEDBENCH_DATA or ~/.cache/automedbench/data]"


def data_root_or_default(value: str | None) -> Path:
    """The flag's folder, or the default data root (resolved when the command starts, as the help says)."""
    from .staging import default_data_root

    return Path(value).expanduser() if value else default_data_root()


@define(frozen=True)
class Flag:
    """How one field appears on the command line, and whether it changes a score."""

    decls: tuple[str, ...]  # the flag(s), e.g. ("--exec-timeout",); empty: not on the command line
    help: str = ""
    type: Any = None  # a click type
    scores: bool = False  # changes a score of the run, so it enters the header's options hash
    multiple: bool = False  # repeatable KEY=VALUE, parsed into a dict
    is_flag: bool = False
    metavar: str | None = None
    show_default: bool = False
    parse: Callable[[Any], Any] | None = None  # click's value -> the field's value


def meta(decls: tuple[str, ...], help: str = "", **kw: Any) -> dict[str, Flag]:
    """A field's attrs metadata: its declaration."""
    return {META: Flag(decls, help, **kw)}


KV = {"multiple": True, "metavar": "KEY=VALUE", "parse": parse_kv}


@define
class RunOptions:
    """Everything that configures one run (the task file gives the rest)."""

    # the header names the task and hashes its TaskSpec and data: not part of the options hash
    task: str = field(metadata=meta(("--task",), "Task id, e.g. segmentation/demo (see `automedbench tasks`)."))
    tier: str = field(default="lite", metadata=meta(
        ("--tier",), "Scaffolding level of the brief (same data and metric).",
        type=click.Choice(["lite", "standard", "pro"]), scores=True, show_default=True))
    agent: str = field(default="reference", metadata=meta(
        ("--agent",), "Agent name, e.g. reference (scripted, offline), openai, anthropic "
        "(see `automedbench plugins`).", scores=True))
    sandbox: str = field(default="local", metadata=meta(
        ("--sandbox",), "Sandbox backend: local (bubblewrap where it works here, else plain), local-plain (no "
        "filesystem isolation) or docker (the [docker] extra; `automedbench images build` first); see "
        "`automedbench plugins`.", scores=True, show_default=True))
    judge: str = field(default="rules", metadata=meta(
        ("--judge",), "Judge backend for S1–S3: rules (offline, deterministic) or an LLM judge, openai, anthropic "
        "or llm (the [models] extra; its model and endpoint with --judge-option); the verdict, model and cost "
        "are kept in judge.json and result.json.", scores=True, show_default=True))
    out: Path = field(default=Path("runs"), metadata=meta(
        ("--out",), "Folder that receives runs/<run-id>/.", type=click.Path(file_okay=False), show_default=True,
        parse=_path))
    data_root: Path | None = field(default=None, metadata=meta(
        ("--data-root",), f"Where staged data lives {DATA_ROOT_DEFAULT}.",
        type=click.Path(file_okay=False), parse=data_root_or_default))
    agent_options: dict[str, Any] = field(factory=dict, metadata=meta(
        ("--agent-option",), "Option passed to the agent, e.g. model=NAME, base_url=URL, api_key_env=VAR (each "
        "agent's options: `automedbench plugins`; scripted agents take none, `scripted` takes variant=NAME); "
        "repeatable.", scores=True, **KV))
    judge_options: dict[str, Any] = field(factory=dict, metadata=meta(
        ("--judge-option",), "Option passed to the judge, e.g. model=NAME, base_url=URL, api_key_env=VAR, or "
        "config=FILE entry=NAME (the rules judge takes none); repeatable.", scores=True, **KV))
    max_turns: int | None = field(default=None, metadata=meta(
        ("--max-turns",), "Override the task's turn budget.", type=click.IntRange(1), scores=True))
    time_limit_s: float | None = field(default=None, metadata=meta(
        ("--time-limit",), "Override the wall-clock budget (s).", type=click.FloatRange(1), scores=True))
    exec_timeout_s: float | None = field(default=None, metadata=meta(
        ("--exec-timeout",), "Override the per-call timeout (s).", type=click.FloatRange(1), scores=True))
    memory_mb: int = field(default=8192, metadata=meta(
        ("--memory-mb",), "Address-space limit per sandboxed call (0 = none).", type=click.IntRange(0),
        scores=True, show_default=True))
    task_score: str | None = field(default=None, metadata=meta(  # None: the task's own default (TaskSpec.task_score)
        ("--task-score",), "Which Task value Overall uses: strict (any missing case gives 0) or partial "
        "[default: the task's, strict for segmentation, partial for VQA].",
        type=click.Choice(["strict", "partial"]), scores=True))
    run_id: str | None = field(default=None, metadata=meta(()))  # set by a sweep (deterministic ids); else a new one
    keep_workspace: bool = field(default=False, metadata=meta(
        ("--keep-workspace",), "Keep the agent's workspace after the run (under a quota: the image "
        "OUT/<run-id>/workspace.img).", is_flag=True))
    # hashed like memory_mb: a smaller disk can end a run that a larger one lets finish
    # None: the task's declared need (TaskSpec.workspace_mb, hashed with the task)
    workspace_quota_mb: int | None = field(default=None, metadata=meta(
        ("--workspace-quota-mb",), "Size limit of the workspace: a loop-mounted sparse ext4 image when run as root, "
        "reserved whole before the run starts (the run is refused when the disk cannot hold it beside what other "
        "running runs were promised); elsewhere none, recorded as a gap; 0 = none [default: the task's declared "
        f"need, `workspace_mb` in its task file; {DEFAULT_QUOTA_MB} MB where it declares none].",
        type=click.IntRange(0), metavar="MB", scores=True))
    gpus: str = field(default="", metadata=meta(
        ("--gpus",), "GPUs this run may use, e.g. 0 or 0,1 (sets CUDA_VISIBLE_DEVICES in the sandbox; "
        "none by default).", metavar="IDS", parse=gpu_ids))
    eval_options: dict[str, str] = field(factory=dict, metadata=meta(
        ("--eval-option",), "Option for the track's evaluator (e.g. answer_judge=offline for VQA); repeatable.",
        scores=True, **KV))
    require_isolation: bool = field(default=False, metadata=meta(
        ("--require-isolation/--no-require-isolation",), "Refuse to run when the sandbox cannot isolate the "
        "filesystem (local without bubblewrap).", show_default=True))
    # how the evaluator process is kept, never what it computes: not hashed. None: warm where the warm evaluator is
    # installed, unless AUTOMEDBENCH_WARM_EVALUATOR=0 (see `warm_wanted`)
    warm_evaluator: bool | None = field(default=None, metadata=meta(
        ("--warm-evaluator/--cold-evaluator",), "Score with one evaluator process that serves the run's pilot "
        "check and its evaluation and stays warm for later runs of the same process (same isolation, same scores; "
        "restarted after 50 evaluations or any failure), or with a fresh process per evaluation "
        f"[default: warm where the campaign built-in is installed, unless {WARM_EVALUATOR_ENV}=0; else cold]."))
    # what the run page shows, never what is scored: not hashed
    pictures: bool = field(default=True, metadata=meta(
        ("--pictures/--no-pictures",), "Draw a small picture of each case (input, output, reference) into the run "
        "folder for the run page, after the run, in the evaluator; --no-pictures leaves them out (e.g. before "
        "publishing pages of a licensed dataset).", show_default=True))
    node: dict[str, str] = field(factory=dict, metadata=meta(()))  # where a sweep executor ran it (host, Ray node)
    # the sweep a run belongs to, signed in its header's attempt: {"id": the sweep's id, "size": its planned runs}
    sweep: dict[str, Any] = field(factory=dict, metadata=meta(()))
    repeat_limit: int = field(default=DEFAULT_REPEAT_LIMIT, metadata=meta(
        ("--repeat-limit",), "Stop the run when the agent makes the same tool call with the same outcome this many "
        f"times in a row (it is told from the {REPEAT_NOTICE_AT}rd on; 0 = never stop).", type=click.IntRange(0),
        show_default=True, scores=True))


def warm_wanted(options: RunOptions, installed: bool) -> bool:
    """Whether the run scores on the warm evaluator: as it says, else wherever the warm evaluator is installed
    unless AUTOMEDBENCH_WARM_EVALUATOR=0 (a core-only install scores cold, and never fails for want of it)."""
    if options.warm_evaluator is not None:
        return options.warm_evaluator
    return installed and os.environ.get(WARM_EVALUATOR_ENV, "") != "0"


def flag_of(name: str) -> Flag:
    return attrs.fields_dict(RunOptions)[name].metadata[META]


def score_record(options: RunOptions) -> dict[str, Any]:
    """The score-changing fields, as hashed into the run's header (paths and placement never are)."""
    return {f.name: getattr(options, f.name) for f in attrs.fields(RunOptions) if f.metadata[META].scores}


# What a leaderboard row already names: the rest of the score-changing options are the run's conditions
ROW_OPTIONS = ("agent", "tier")


def conditions_record(options: RunOptions) -> dict[str, Any]:
    """The score-changing options but the agent and the tier (budgets, task score, judge, sandbox, agent and
    evaluator options...): runs whose conditions differ are never pooled in one leaderboard row.

    With `--gpus`, how many GPUs the agent had: compute it could train on, as `--memory-mb` is (a GPU run was
    pooled with CPU-only ones). Their count, not their ids (a sweep gives each concurrent run other devices), and
    only when there are some (a run without GPUs keeps the digest it always had)."""
    record = {k: v for k, v in score_record(options).items() if k not in ROW_OPTIONS}
    if options.gpus:
        record["gpus"] = len(options.gpus.split(","))
    return record


def click_options(*names: str, **overrides: dict[str, Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Click options for the named fields, in that order; `overrides[name]` changes click keywords for one
    command (e.g. `agent={"required": True}` or a help text that fits a sweep)."""
    fields = attrs.fields_dict(RunOptions)
    unknown = [n for n in [*names, *overrides] if n not in fields or not fields[n].metadata[META].decls]
    if unknown:
        raise ValueError(f"no command-line flag for RunOptions field(s) {', '.join(unknown)}")

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        for name in reversed(names):
            f = fields[name]
            flag: Flag = f.metadata[META]
            kw: dict[str, Any] = {"help": flag.help, "show_default": flag.show_default}
            if flag.multiple:
                kw.update(multiple=True)
            elif flag.is_flag:
                kw.update(is_flag=True)
            elif f.default is attrs.NOTHING:
                kw.update(required=True)
            if not flag.multiple and (f.default is None or isinstance(f.default, (str, int, float, bool, Path))):
                kw["default"] = str(f.default) if isinstance(f.default, Path) else f.default
            if flag.type is not None:
                kw["type"] = flag.type
            if flag.metavar:
                kw["metavar"] = flag.metavar
            kw.update(overrides.get(name, {}))
            if kw.get("required") and "default" not in overrides.get(name, {}):
                kw.pop("default", None)  # a required flag has no default (click would let the default satisfy it)
            fn = click.option(*flag.decls, name, **kw)(fn)
        return fn

    return decorate


def from_cli(params: dict[str, Any]) -> dict[str, Any]:
    """Take the RunOptions fields out of a command's keyword arguments (removed from `params`) and parse
    them into field values; the rest stays for the command itself."""
    values: dict[str, Any] = {}
    for f in attrs.fields(RunOptions):
        if f.name in params:
            flag: Flag = f.metadata[META]
            raw = params.pop(f.name)
            values[f.name] = flag.parse(raw) if flag.parse is not None else raw
    return values


# The options a run's header names by a field of its own (`Header.task`, ...); the rest it keeps in `Header.options`
HEADER_NAMED = ("task", "tier", "agent", "sandbox", "judge")


def changed_options(options: RunOptions) -> dict[str, Any]:
    """The score-changing options a run changed from their defaults, but those its header names, and its GPU ids
    when it had some: with the header, what `rerun_command` gives the run's command line from."""
    out: dict[str, Any] = {}
    for f in attrs.fields(RunOptions):
        if not f.metadata[META].scores or f.name in HEADER_NAMED:
            continue
        default = f.default.factory() if isinstance(f.default, attrs.Factory) else f.default  # type: ignore[misc]
        value = getattr(options, f.name)
        if value != default:
            out[f.name] = mask_value(f.name, value)  # the header is shared: no credential (the digest has it)
    if options.gpus:
        out["gpus"] = options.gpus
    # as result.json keeps them, through the one writer every record goes through (tuples as lists, e.g. a scripted
    # agent's turns; a lone surrogate from non-UTF-8 argv as visible text): the header a run returns is the one it
    # stored, which `result.json == the run's result` checks rely on
    return json.loads(json_text(to_dict(out)))


def rerun_command(header: dict[str, Any]) -> str:
    """The `automedbench run` command line that makes a run like this one (same task, tier, agent and every
    score-changing option; `--out` and `--data-root` are the user's), from a result's header as stored; "" when
    the header does not say (an `evaluate` record, or a result written before its options were kept)."""
    import shlex

    options = header.get("options")
    if not isinstance(options, dict) or header.get("tier") not in ("lite", "standard", "pro"):
        return ""
    words = ["automedbench", "run", "--task", str(header.get("task")), "--tier", str(header.get("tier")),
             "--agent", str(header.get("agent"))]
    for name, default in (("sandbox", "local"), ("judge", "rules")):
        if header.get(name) != default:
            words += [f"--{name}", str(header.get(name))]
    fields = attrs.fields_dict(RunOptions)
    for name, value in options.items():
        if name not in fields or not fields[name].metadata[META].decls:
            continue
        flag = fields[name].metadata[META].decls[0]
        if isinstance(value, dict):
            for key, item in value.items():
                words += [flag, f"{key}={mask_value(str(key), item)}"]
        else:
            words += [flag, str(mask_value(name, value))]
    return shlex.join(words)
