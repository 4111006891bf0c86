"""The error-code detector interface: what a detector sees of one finished run, and what it returns.

Detectors are plugins (hook `automedbench_register_code_detectors`, exported through automedbench.api);
the engine (`automedbench.codes`) builds the context from a stored run and runs them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from functools import cached_property
from pathlib import Path
from typing import Any

from attrs import define, field

from .records import FiredCode, Result
from .trace import Trace


@define
class CodeContext:
    """Everything a detector may look at for one finished run."""

    result: Result
    events: list[dict[str, Any]]
    run_dir: Path | None = None
    output_names: list[str] = field(factory=list)
    plan_md: str | None = None
    evaluation: dict[str, Any] | None = None

    @cached_property
    def trace(self) -> Trace:
        return Trace(self.events, self.output_names)

    # Convenience facts from the scored result.
    @property
    def expected(self) -> int:
        return len(self.result.cases)

    @property
    def present(self) -> list[str]:
        return [c.case_id for c in self.result.cases if c.present]

    @property
    def invalid(self) -> list[Any]:
        return [c for c in self.result.cases if c.present and not c.valid]

    @property
    def missing(self) -> list[str]:
        return [c.case_id for c in self.result.cases if not c.present]

    def item(self, item_id: str) -> float | None:
        for stage in self.result.stages:
            for item in stage.items:
                if item.id == item_id:
                    return item.value
        return None


class Detector(ABC):
    """One deterministic rule family; `tracks` names the tracks it applies to ("*" for all)."""

    name: str = ""
    version: str = "1"
    tracks: tuple[str, ...] = ("*",)

    @abstractmethod
    def detect(self, ctx: CodeContext) -> list[FiredCode]:
        """Return the codes this rule fires for the run (empty when it is clean)."""

    def fire(self, code: str, message: str, turns: list[int] | None = None, stage: str = "") -> FiredCode:
        from .codes.taxonomy import TAXONOMY  # here: importing automedbench.codes loads the engine's side

        if code not in TAXONOMY:
            raise ValueError(f"detector {self.name} fired unknown code {code!r}")
        return FiredCode(code, message, stage, sorted(set(turns or [])), f"detector:{self.name}")
