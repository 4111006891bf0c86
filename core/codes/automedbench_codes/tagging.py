"""The tagging step: run the detectors that serve a run's track over the stored run (the interface and the
taxonomy: automedbench.detectors).

Detectors are plugins (hook `automedbench_register_code_detectors`); each says which tracks it serves
("*" = every track). They read the stored run only, are deterministic, and return FiredCode records.
Tagging never touches a score: it only replaces the E-codes in `Result.error_codes`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from automedbench.api import NOT_TAGGED, CodeContext, Detector, FiredCode, Result, is_error_code
from automedbench.engine import RunFolder


def context_from_run_dir(run_dir: Path, result: Result, output_names: list[str] | None = None) -> CodeContext:
    """The detectors' view of a stored run: its events, plan and evaluation from the run folder."""
    folder = RunFolder(run_dir)
    return CodeContext(result, folder.events(), run_dir, list(output_names or []), folder.plan_md(),
                       folder.evaluation_data())


def detectors_for(track: str, registry: Any) -> list[Detector]:
    """Instantiate every registered detector that serves `track`, in name order (stable output)."""
    found = []
    for name in sorted(registry.components.get("code_detector", {})):
        detector = registry.create("code_detector", name)
        if "*" in detector.tracks or track in detector.tracks:
            found.append(detector)
    return found


def skip_reason(result: Result) -> str | None:
    """Runs the taxonomy does not apply to: breaches are recorded in `isolation`, not as E-codes."""
    if result.isolation.breached:
        return "isolation breach (recorded in result.isolation, not as an error code)"
    if result.state in ("infrastructure_failure", "cancelled"):
        return f"run state {result.state}: nothing the agent did was scored"
    return None


def merge(codes: list[FiredCode]) -> list[FiredCode]:
    """One record per code: several detectors firing the same code share it (turns and sources joined)."""
    by_code: dict[str, FiredCode] = {}
    for fired in codes:
        seen = by_code.get(fired.code)
        if seen is None:
            by_code[fired.code] = FiredCode(fired.code, fired.message, fired.stage, list(fired.evidence_turns),
                                            fired.source)
            continue
        seen.message = f"{seen.message}; {fired.message}"
        seen.evidence_turns = sorted(set(seen.evidence_turns) | set(fired.evidence_turns))
        if fired.source not in seen.source.split(","):
            seen.source = f"{seen.source},{fired.source}"
    return [by_code[c] for c in sorted(by_code)]


def detect(ctx: CodeContext, detectors: list[Detector]) -> list[FiredCode]:
    """Run the detectors; a detector that raises is reported as a harness code, never fatal."""
    if skip_reason(ctx.result):
        return []
    fired: list[FiredCode] = []
    problems: list[FiredCode] = []
    for detector in detectors:
        try:
            fired.extend(detector.detect(ctx))
        except Exception as exc:  # one broken detector must not lose the others' codes
            problems.append(FiredCode("H-DETECTOR", f"{detector.name}: {type(exc).__name__}: {exc}",
                                      source=f"detector:{detector.name}"))
    return merge(fired) + problems


def replace_codes(result: Result, new: list[FiredCode]) -> None:
    """Swap the run's E-codes (detector problems, the untagged note) for `new`; harness codes such as H-BREACH stay."""
    kept = [c for c in result.error_codes if not is_error_code(c.code) and c.code not in ("H-DETECTOR", NOT_TAGGED)]
    result.error_codes = kept + new


def tag_run(run_dir: Path, result: Result, registry: Any, output_names: list[str] | None = None,
            tagger: Any = None) -> list[FiredCode]:
    """Detect (and optionally LLM-tag) the codes of one stored run and put them into `result`."""
    ctx = context_from_run_dir(run_dir, result, output_names)
    codes = detect(ctx, detectors_for(result.header.track, registry))
    if tagger is not None and not skip_reason(result):
        extra = tagger.tag(ctx)
        codes = merge([c for c in codes + extra if is_error_code(c.code)]) + [
            c for c in codes + extra if not is_error_code(c.code)]
    replace_codes(result, codes)
    return codes
