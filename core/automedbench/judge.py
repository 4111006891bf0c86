"""The Judge interface: grades S1–S3 rubric items from the plan artefacts and the trajectory.

A judge never receives the task metric, so it cannot anchor on the outcome.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from attrs import Factory, define

from .records import JudgeVerdict, RubricItem, TaskSpec

if TYPE_CHECKING:
    from .rubric import Resolved


@define
class JudgeInput:
    task: TaskSpec
    tier: str
    rubric: list[RubricItem]
    plan_md: str | None
    plan_png: bytes | None
    events: list[dict[str, Any]]
    brief: str = ""
    extra: dict[str, Any] = Factory(dict)
    # the whole rubric as settled for this run; `rubric` above is its graded items
    resolved: Resolved | None = None


class Judge(ABC):
    name: str = ""
    version: str = "1"

    @abstractmethod
    def grade(self, judge_input: JudgeInput) -> JudgeVerdict:
        """Return one verdict per rubric item; set `error` (and values None) when it cannot grade."""
