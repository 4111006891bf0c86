"""The error-code contract: the paper's taxonomy E1–E5, what a detector sees of one finished run, and what
it returns.

Detectors are plugins (hook `automedbench_register_code_detectors`, exported through automedbench.api); the
tagging step that builds the context from a stored run and runs them is a plugin too (hook
`automedbench_tag_codes`: automedbench-codes). Codes are diagnostic only: a code never changes a score.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from functools import cached_property
from pathlib import Path
from typing import Any

from attrs import define, field

from .records import FiredCode, Result
from .trace import Trace


@define(frozen=True)
class CodeInfo:
    code: str
    name: str
    category: str  # "knowledge" (E1) or "engineering" (E2–E5), as the paper groups them
    definition: str


TAXONOMY: dict[str, CodeInfo] = {
    "E1": CodeInfo("E1", "understanding", "knowledge",
                   "solves the wrong problem, or picks an approach incompatible with the objective, modality, "
                   "metric, constraints or artefact"),
    "E2": CodeInfo("E2", "data/model setup", "engineering",
                   "understands the task but cannot access, prepare, load or configure data, models, APIs, "
                   "dependencies or runtime resources"),
    "E3": CodeInfo("E3", "verification/recovery", "engineering",
                   "invalid intermediate or final outputs are visible, but the agent fails to detect, validate, "
                   "debug or recover"),
    "E4": CodeInfo("E4", "implementation/execution", "engineering",
                   "the pipeline is plausible, but code, commands or processing logic fail during execution"),
    "E5": CodeInfo("E5", "deliverable/submission", "engineering",
                   "usable outputs exist or could have been produced, but the final artefacts are missing, "
                   "incomplete, malformed, misnamed, misplaced or schema-incompatible"),
}

E_CODES: tuple[str, ...] = tuple(TAXONOMY)

# With no tagging step installed a run records this harness note instead of codes, so "none fired" and
# "never tagged" read differently; re-tagging the run replaces it.
NOT_TAGGED = "H-UNTAGGED"
NO_TAGGER = ("no error codes recorded: no error-code tagging step is installed (it comes with automedbench-codes): "
             "pip install 'automedbench[codes]'")


def tag_codes(result: Result, run_dir: Path, registry: Any, output_names: list[str],
              tagger: Any = None) -> list[FiredCode] | None:
    """The run's codes from the tagging step a plugin offers (`automedbench_tag_codes`), put into `result`;
    None when no plugin tags (then nothing is changed)."""
    return registry.pm.hook.automedbench_tag_codes(result=result, run_dir=run_dir, registry=registry,
                                                   output_names=output_names, tagger=tagger)


def is_error_code(code: str) -> bool:
    """E1–E5 only; harness codes (H-BREACH, H-BUDGET, ...) are bookkeeping, not taxonomy codes."""
    return code in TAXONOMY


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

    def flagged(self, key: str) -> list[str]:
        """The valid cases whose metric row says `key` (a fact the evaluator recorded, e.g. `same_as_input`)."""
        return [r["case_id"] for r in self.valid_rows if r.get(key)]

    @property
    def valid_rows(self) -> list[dict[str, Any]]:
        """The metric's per-case rows of the valid cases: the evaluator's facts a track's detector reads."""
        metric = self.result.task
        return [r for r in (metric.per_case if metric else []) if r.get("valid")]

    @property
    def last_write_turns(self) -> list[int]:
        """The turn of the agent's last write to its outputs, as a detector's evidence (empty: it wrote none)."""
        return [self.trace.last_write["turn"]] if self.trace.last_write else []

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

    def fire_cases(self, code: str, cases: list[str], what: str, turns: list[int] | None = None,
                   stage: str = "") -> list[FiredCode]:
        """`code` for the `cases` a rule found (none: nothing fires), said as "N <what>: the first five"."""
        return [self.fire(code, f"{len(cases)} {what}: {', '.join(cases[:5])}", turns, stage)] if cases else []

    def fire(self, code: str, message: str, turns: list[int] | None = None, stage: str = "") -> FiredCode:
        if code not in TAXONOMY:
            raise ValueError(f"detector {self.name} fired unknown code {code!r}")
        return FiredCode(code, message, stage, sorted(set(turns or [])), f"detector:{self.name}")
