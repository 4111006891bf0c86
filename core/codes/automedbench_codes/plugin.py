"""The error-code components, registered through the hooks a third-party plugin uses."""

from __future__ import annotations

from automedbench.api import hookimpl


@hookimpl
def automedbench_register_code_detectors(register) -> None:
    from .generic import GENERIC_DETECTORS

    for name, cls in GENERIC_DETECTORS.items():
        register(name, cls, f"error codes, every track: {(cls.__doc__ or '').strip().splitlines()[0]}")


@hookimpl
def automedbench_tag_codes(result, run_dir, registry, output_names, tagger):
    """Post-run error codes E1–E5 from the registered detectors, and from a model when `tagger` is given
    (diagnostic: scores are untouched)."""
    from .tagging import tag_run

    return tag_run(run_dir, result, registry, output_names, tagger)
