"""Stagers for the official download layouts of the real datasets (KiTS19, MSD, PanTS, FeTA)."""

from __future__ import annotations

from pathlib import Path

from automedbench.errors import UserError
from automedbench.records import TaskSpec
from automedbench.track import StagedData


def stage_real(task: TaskSpec, dest: Path, source: Path) -> StagedData:
    raise UserError(f"no stager for {task.id} yet")
