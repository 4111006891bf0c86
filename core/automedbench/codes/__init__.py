"""Post-run error codes E1–E5: taxonomy, per-track detector registry, optional LLM tagger."""

from .detect import (
    CodeContext,
    Detector,
    context_from_run_dir,
    detect,
    detectors_for,
    replace_codes,
    skip_reason,
    tag_run,
)
from .taxonomy import E_CODES, TAXONOMY, is_error_code

__all__ = ["E_CODES", "TAXONOMY", "CodeContext", "Detector", "context_from_run_dir", "detect", "detectors_for",
           "is_error_code", "replace_codes", "skip_reason", "tag_run"]
