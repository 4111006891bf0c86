"""Load task data files (YAML) into `TaskSpec`, with one clear message per problem."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import cattrs

from .errors import UserError
from .records import TIERS, TaskSpec
from .serialize import converter
from .yamlfile import read_yaml

_REQUIRED = [a.name for a in attrs.fields(TaskSpec) if a.default is attrs.NOTHING]


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
        spec = converter.structure(data, TaskSpec)
    except cattrs.BaseValidationError as exc:
        raise UserError(f"task file {origin}: {'; '.join(cattrs.transform_error(exc))}") from None
    bad_tiers = sorted(set(spec.tiers) - set(TIERS))
    if bad_tiers or not spec.tiers:
        raise UserError(f"task file {origin}: tiers must be a non-empty subset of {TIERS}, got {bad_tiers}")
    if spec.case_count <= 0 or spec.time_limit_s <= 0 or spec.max_turns <= 0 or spec.exec_timeout_s <= 0:
        raise UserError(f"task file {origin}: case_count and the budgets must be positive")
    if not 0 <= spec.text_reply_continues <= 100:
        raise UserError(f"task file {origin}: text_reply_continues must be between 0 and 100")
    if not spec.id.startswith(spec.track + "/"):
        raise UserError(f"task file {origin}: id {spec.id!r} must start with the track name {spec.track!r}/")
    if not 0 <= spec.rating.okay <= spec.rating.good <= 1:
        raise UserError(f"task file {origin}: rating thresholds need 0 <= okay <= good <= 1")
    return spec


def load_task_file(path: Path) -> TaskSpec:
    return parse_task(read_yaml(path, "task file"), str(path))


def load_task_dir(folder: Path) -> list[TaskSpec]:
    return [load_task_file(p) for p in sorted(folder.glob("*.yaml"))]
