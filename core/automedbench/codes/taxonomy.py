"""The paper's post-run error taxonomy E1–E5 (diagnostic only: a code never changes a score)."""

from __future__ import annotations

from attrs import define


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


def is_error_code(code: str) -> bool:
    """E1–E5 only; harness codes (H-BREACH, H-BUDGET, ...) are bookkeeping, not taxonomy codes."""
    return code in TAXONOMY
