"""The Judge interface: grades S1–S3 rubric items from the plan artefacts and the trajectory.

A judge never receives the task metric, so it cannot anchor on the outcome. `asked_items` and
`verdict_schema` say what any judge that asks a model is asked, and the reply's shape (track tests check both).
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


def asked_items(judge_input: JudgeInput) -> list[RubricItem]:
    """The items to grade: the run's graded items (auto-pass, excluded and not-applicable ones are settled
    by the rubric, as for the rules judge)."""
    return [i for i in judge_input.rubric if i.at_tier(judge_input.tier) == "graded"]


def verdict_schema(items: list[RubricItem]) -> dict[str, Any]:
    """A strict JSON schema (every property required, no extras) for the reply."""
    props = {}
    for item in items:
        props[item.id] = {
            "type": "object", "additionalProperties": False,
            "required": ["value", "rationale", "evidence_turns", "evidence_files"],
            "properties": {"value": {"type": "number", "enum": list(item.levels)},
                           "rationale": {"type": "string"},
                           "evidence_turns": {"type": "array", "items": {"type": "integer"}},
                           # workspace paths: plan/plan.md, plan/plan.png, a script the agent ran
                           "evidence_files": {"type": "array", "items": {"type": "string"}}},
        }
    return {"type": "object", "additionalProperties": False, "required": ["items"],
            "properties": {"items": {"type": "object", "additionalProperties": False,
                                     "required": [i.id for i in items], "properties": props}}}
