"""Test agents: one that runs given code steps, and a way to put any agent class into a registry."""

from __future__ import annotations

import json
import types
from typing import Any

from automedbench.api import Agent, AgentTurn, ToolCall, hookimpl


def register_agent(cls: type[Agent], registry: Any = None) -> Any:
    """Add a test agent class to a registry (default: the process-wide one) under its `name`; idempotent.

    Returns the registry, so `register_agent(Cls, reg).agent(...)` reads in one line."""
    from automedbench.engine import registry as default_registry

    reg = registry if registry is not None else default_registry()
    module = types.ModuleType(f"test_agent_{cls.name}")

    @hookimpl
    def automedbench_register_agents(register: Any) -> None:
        register(cls.name, cls, "test agent")

    module.automedbench_register_agents = automedbench_register_agents  # type: ignore[attr-defined]
    reg.add_plugin(module, name=module.__name__)
    return reg


class StepsAgent(Agent):
    """Runs the given (language, code) steps, one `execute_code` call per turn, then submits.

    Language "raw" passes the code as the call's raw arguments string (to test argument parsing)."""

    name = "review-steps"

    def __init__(self, steps: list[list[str]] | None = None, submit: bool = True) -> None:
        self.steps = list(steps or [])
        self.submit = submit
        self.turn = 0

    def next_turn(self, messages: Any) -> AgentTurn:
        self.turn += 1
        if self.turn <= len(self.steps):
            language, code = self.steps[self.turn - 1]
            args = code if language == "raw" else json.dumps({"language": language, "code": code})
            return AgentTurn(f"step {self.turn}", [ToolCall(f"c{self.turn}", "execute_code", args)])
        if self.submit and self.turn == len(self.steps) + 1:
            return AgentTurn("submit", [ToolCall("s", "submit_results", "{}")])
        return AgentTurn("done", [])
