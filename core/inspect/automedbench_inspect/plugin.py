"""The `inspect` agent, registered through the hooks every plugin uses (it needs no inspect_ai to be listed)."""

from __future__ import annotations

from automedbench.api import hookimpl


@hookimpl
def automedbench_register_agents(register) -> None:
    def bridge(**options):
        from .bridge import BridgeAgent

        return BridgeAgent(**options)

    # declared: the bridge's own factory takes **options, so a typo was silently dropped
    register("inspect", bridge, "an inspect_ai agent and model, turn by turn (started by `inspect eval "
                                "automedbench_inspect/TASK`; automedbench-inspect): model=, solver=",
             options=["model", "solver"])
