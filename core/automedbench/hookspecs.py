"""pluggy hook specifications. Plugins (and the core's own built-ins) implement these with `hookimpl`.

Each hook receives a `register` callable; call it once per component:
`register(name, factory, description="")` where `factory()` returns the component. An agent's or judge's options
(`--agent-option`, `--judge-option`) are its factory's keyword parameters; a factory taking `**options` names them
with `options=["model", ...]` (`register(name, factory, description, options=[...])`), so a misspelt one is refused
in one line before any run, also in a sweep (without either, the factory checks its own).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pluggy

PROJECT = "automedbench"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

Register = Callable[..., None]


@hookspec
def automedbench_register_tracks(register: Register) -> None:
    """Register Track instances (factory returns a `Track`)."""


@hookspec
def automedbench_register_agents(register: Register) -> None:
    """Register agent factories (factory(**options) returns an `Agent`)."""


@hookspec
def automedbench_register_sandboxes(register: Register) -> None:
    """Register sandbox backends (factory returns a `Sandbox`)."""


@hookspec
def automedbench_register_judges(register: Register) -> None:
    """Register judge backends (factory(**options) returns a `Judge`)."""


@hookspec
def automedbench_register_code_detectors(register: Register) -> None:
    """Register post-run error-code detectors (factory returns a `detectors.Detector`; its `tracks` says where)."""


@hookspec
def automedbench_register_model_backends(register: Register) -> None:
    """Register model providers: factory(cfg: ModelConfig) returns a `ModelBackend` (chat with tools,
    plain completion, images, retries, pricing). Every model consumer (chat agents, LLM judge,
    error-code tagger, answer judges, graders) reaches a provider through this kind, by name.
    A provider declares what the core cannot know of it as keywords of `register`: `key_env="VAR"`, the
    environment variable its key is read from unless `api_key_env=` names another (none declared: keyless unless
    named), and `defaults={field: value}`, its own ModelConfig defaults (options and config entries win)."""


@hookspec
def automedbench_register_evaluators(register: Register) -> None:
    """Register evaluator backends: factory() returns `fn(request: EvalRequest, timeout_s) -> Evaluation`
    that scores a frozen submission in isolation (the built-in "process"; the docker plugin's "docker")."""


@hookspec
def automedbench_run_finished(result: Any, run_dir: Path, registry: Any, output_names: list[str]) -> None:
    """Called once per run after scoring, before `result.json` is written; may annotate `result`
    (the core's subscriber asks for the error codes: `automedbench_tag_codes`). Each implementation runs in
    its own try: a failure is recorded in `result.error_codes` as H-HOOK and never changes the run's state."""


@hookspec
def automedbench_result_written(result: Any, run_dir: Path) -> None:
    """Called once per run after `result.json` is written and signed, with the record as stored (its times final):
    for what shows the finished run (the campaign's run page), so its numbers are the result's. A failure is
    reported as a warning on the run's progress; the record is written and never changes."""


@hookspec(firstresult=True)
def automedbench_tag_codes(result: Any, run_dir: Path, registry: Any, output_names: list[str], tagger: Any) -> Any:
    """Put the run's error codes E1–E5 into `result.error_codes` from the registered detectors and return them
    (automedbench-codes does). The first answer wins; with none, the run records the `H-UNTAGGED` note.
    `tagger` (None after a run) also asks a model (`automedbench codes --tagger`): an object with
    `tag(CodeContext) -> list[FiredCode]`."""


@hookspec(firstresult=True)
def automedbench_grade_requests(requests: list[Any], options: dict[str, str], registry: Any,
                                trusted: bool) -> Any:
    """Answer an evaluation's `GradeRequest`s with models, outside the isolated evaluator (automedbench-models
    does): a `GradeLog` with one `Grade` per request, in order (score None and the reason when unanswered).
    The first answer wins; with none, every grade is null and the run stays scored. `trusted` is False for an
    unverified run (no filesystem isolation): it shares nothing a verified run relies on (no persistent cache
    to read or to fill)."""


@hookspec(firstresult=True)
def automedbench_reply_hint(reply: str, tools: list[dict[str, Any]], prompt: str, data_dir: str) -> Any:
    """What was wrong with an agent's reply that made no tool call (a near-miss call, an echo...): a
    `ReplyHint` whose message the runner sends back; None: the core's generic message with one valid call."""


@hookspec
def automedbench_register_commands(cli: Any, context: Any) -> None:
    """Add a feature's own command-line commands: `cli` is a click group (`cli.add_command(cmd)` or
    `@cli.command()`). Read only by the command line, on first use. A name the engine or an earlier plugin
    already uses is reported as a plugin problem (on stderr and by `automedbench plugins`), and dropped.
    `context` (a `CommandContext`: the consoles to print on and the registry the command line uses) is what a
    command needs of the command line; a command gets the same object as its click context's `obj`
    (`@click.pass_obj`), so it never imports the command line. An implementation may leave `context` out."""


KINDS: dict[str, str] = {
    "track": "automedbench_register_tracks",
    "agent": "automedbench_register_agents",
    "sandbox": "automedbench_register_sandboxes",
    "judge": "automedbench_register_judges",
    "code_detector": "automedbench_register_code_detectors",
    "evaluator": "automedbench_register_evaluators",
    "model": "automedbench_register_model_backends",
}


