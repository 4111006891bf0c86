"""Load task data files (YAML) into `TaskSpec`, with one clear message per problem."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import attrs
import cattrs

from .errors import UserError
from .records import MAX_WORKSPACE_MB, MIN_WORKSPACE_MB, TIERS, TaskSpec
from .serialize import converter
from .yamlfile import read_yaml

_REQUIRED = [a.name for a in attrs.fields(TaskSpec) if a.default is attrs.NOTHING]


def _strict_str(value: Any, _type: type) -> str:
    """A text field must be text in the YAML: an unquoted `: ` in a list item makes a mapping, and
    turning that into its Python repr would put `{'...': '...'}` into a brief."""
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {type(value).__name__} {value!r} (quote it in the YAML)")
    return value


_converter = converter.copy()
_converter.register_structure_hook(str, _strict_str)


def parse_task(data: Any, origin: str) -> TaskSpec:
    if not isinstance(data, dict):
        raise UserError(f"task file {origin}: expected a mapping at the top level")
    missing = [name for name in _REQUIRED if name not in data]
    if missing:
        raise UserError(f"task file {origin}: missing field(s) {', '.join(missing)}")
    known = {a.name for a in attrs.fields(TaskSpec)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise UserError(f"task file {origin}: unknown field(s) {', '.join(unknown)}")
    try:
        spec = _converter.structure(data, TaskSpec)
    except cattrs.BaseValidationError as exc:
        problems = "; ".join(cattrs.transform_error(exc))
        hint = " (text must be a string: quote a value holding ': ')" if "expected str" in problems else ""
        raise UserError(f"task file {origin}: {problems}{hint}") from None
    bad_tiers = sorted(set(spec.tiers) - set(TIERS))
    if bad_tiers or not spec.tiers:
        raise UserError(f"task file {origin}: tiers must be a non-empty subset of {TIERS}, got {bad_tiers}")
    if spec.case_count <= 0 or spec.time_limit_s <= 0 or spec.max_turns <= 0 or spec.exec_timeout_s <= 0:
        raise UserError(f"task file {origin}: case_count and the budgets must be positive")
    if not MIN_WORKSPACE_MB <= spec.workspace_mb <= MAX_WORKSPACE_MB:
        raise UserError(f"task file {origin}: workspace_mb must be between {MIN_WORKSPACE_MB} and {MAX_WORKSPACE_MB} "
                        f"(MB the agent's workspace may need), got {spec.workspace_mb}")
    if not 0 <= spec.text_reply_continues <= 100:
        raise UserError(f"task file {origin}: text_reply_continues must be between 0 and 100")
    if not spec.id.startswith(spec.track + "/"):
        raise UserError(f"task file {origin}: id {spec.id!r} must start with the track name {spec.track!r}/")
    if not 0 <= spec.rating.okay <= spec.rating.good <= 1:
        raise UserError(f"task file {origin}: rating thresholds need 0 <= okay <= good <= 1")
    bad_modules = [m for m in spec.needs.modules if not all(part.isidentifier() for part in m.split("."))]
    if bad_modules:
        raise UserError(f"task file {origin}: needs.modules holds import names, not {', '.join(bad_modules)}")
    if not re.fullmatch(r"[A-Za-z0-9_.,\[\]<>=!~ -]*", spec.needs.install):
        raise UserError(f"task file {origin}: needs.install is a pip requirement line, not {spec.needs.install!r}")
    if spec.rating.floor is not None and not 0 <= spec.rating.floor <= spec.rating.okay:
        raise UserError(f"task file {origin}: rating floor needs 0 <= floor <= okay")
    if spec.public_source and (spec.demo or not re.fullmatch(r"https://[^\s]+", spec.public_source)):
        raise UserError(f"task file {origin}: public_source must be the https:// address of the labelled source "
                        "(a real task's; a generated demo has none)")
    seeds = sorted(k for k in spec.params if SEED_PARAM.search(str(k)))
    if seeds and not spec.demo:
        raise UserError(f"task file {origin}: params {', '.join(seeds)}: a real task's hidden choices (sample, order, "
                        "case ids, degradations) come from the per-staging secret, never from the task file; "
                        "remove the seed")
    return spec


SEED_PARAM = re.compile(r"(^|_)seed$", re.I)


def load_task_file(path: Path) -> TaskSpec:
    return parse_task(read_yaml(path, "task file"), str(path))


def load_task_dir(folder: Path) -> list[TaskSpec]:
    return [load_task_file(p) for p in sorted(folder.glob("*.yaml"))]


def load_task_files(folder: Path) -> tuple[list[TaskSpec], list[str]]:
    """Every task file of `folder` that loads, and one line for each that does not (its path and field): one typo
    hid every task of its track from `automedbench tasks`."""
    specs, problems = [], []
    for path in sorted(folder.glob("*.yaml")):
        try:
            specs.append(load_task_file(path))
        except UserError as exc:
            problems.append(str(exc))
    return specs, problems
