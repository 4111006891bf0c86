"""The core's own components, registered through the same hooks a third-party plugin uses."""

from __future__ import annotations

from functools import partial

from .hookspecs import Register, hookimpl


@hookimpl
def automedbench_register_agents(register: Register) -> None:
    from .agents.scripted import VARIANTS, ScriptedAgent

    for variant, description in VARIANTS.items():
        register(variant, partial(ScriptedAgent, variant), f"scripted: {description}")


@hookimpl
def automedbench_register_sandboxes(register: Register) -> None:
    from .sandboxes.local import LocalSandbox

    register("local", partial(LocalSandbox, "auto"),
             "host process in a bubblewrap namespace when bwrap works here, else plain (default)")
    register("local-plain", partial(LocalSandbox, "none"),
             "host process, scrubbed environment and limits only (no filesystem isolation)")
    from .sandboxes.docker import DockerSandbox

    register("docker", DockerSandbox,
             "docker container per run (read-only root, no network, limits) and an evaluator container")


@hookimpl
def automedbench_register_judges(register: Register) -> None:
    from .judges.rules import RulesJudge

    register("rules", RulesJudge, "deterministic evidence checks over plan.md, plan.png and the trajectory")
