"""The core's own components, registered through the same hooks a third-party plugin uses."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from .hookspecs import Register, hookimpl


@hookimpl
def automedbench_register_agents(register: Register) -> None:
    from .agents.scripted import VARIANTS

    for variant, description in VARIANTS.items():
        register(variant, _core_variant(variant), f"scripted: {description}")
    register("scripted", _track_variant,
             "scripted: a track's own flawed variant (--agent-option variant=NAME, see Track.scripted_variants)")


def _core_variant(variant: str) -> Callable[[], object]:
    """The factory of one of the core's scripted agents: it takes no options (one given is refused by name)."""

    def make() -> object:
        from .agents.scripted import ScriptedAgent

        return ScriptedAgent(variant)

    return make


def _track_variant(variant: str = "reference") -> object:
    from .agents.scripted import ScriptedAgent

    return ScriptedAgent(variant, track_variant=True)


@hookimpl
def automedbench_register_sandboxes(register: Register) -> None:
    from .sandboxes.local import LocalSandbox

    register("local", partial(LocalSandbox, "auto"),
             "host process in a bubblewrap namespace when bwrap works here, else plain (default)")
    register("local-plain", partial(LocalSandbox, "none"),
             "host process, scrubbed environment and limits only (no filesystem isolation)")


@hookimpl
def automedbench_register_judges(register: Register) -> None:
    from .judges.rules import RulesJudge

    register("rules", RulesJudge, "deterministic evidence checks over plan.md, plan.png and the trajectory")


@hookimpl
def automedbench_run_finished(result, run_dir, registry, output_names) -> None:
    """Post-run error codes E1–E5 from the tagging step a plugin offers (diagnostic: scores are untouched);
    without one, a harness note says why the run has none."""
    from .detectors import NO_TAGGER, NOT_TAGGED, tag_codes
    from .records import FiredCode

    try:
        tagged = tag_codes(result, run_dir, registry, output_names)
    except Exception as exc:
        result.error_codes.append(FiredCode("H-DETECTOR", f"tagging failed: {type(exc).__name__}: {exc}"))
        return
    if tagged is None:
        result.error_codes.append(FiredCode(NOT_TAGGED, NO_TAGGER))


@hookimpl
def automedbench_register_evaluators(register: Register) -> None:
    def process():
        from .evaluator import evaluate_in_process

        return evaluate_in_process

    register("process", process, "local `python -I` subprocess, scrubbed environment (default)")
