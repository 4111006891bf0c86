"""The Agent interface: anything that, shown the conversation so far, returns its next turn."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from attrs import Factory, define

from .records import AgentTurn, TaskSpec

TOOLS: list[dict[str, Any]] = [
    {
        "name": "execute_code",
        "description": (
            "Run code in a fresh process inside the sandbox (cwd = the workspace). State does not persist "
            "between calls; write files to keep it. Returns exit code, stdout and stderr (tails)."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "language": {"type": "string", "enum": ["python", "bash"]},
                "code": {"type": "string"},
            },
            "required": ["language", "code"],
        },
    },
    {
        "name": "submit_results",
        "description": "Declare the outputs final. Ends the run; call it once, after verifying the outputs.",
        "parameters": {"type": "object", "properties": {}},
    },
]


@define
class AgentContext:
    """What an agent is told at the start: the rendered brief, tools and the paths as it sees them."""

    task: TaskSpec
    tier: str
    brief: str
    kickoff: str
    tools: list[dict[str, Any]]
    data_dir: str
    workspace_dir: str
    track: Any = None
    options: dict[str, Any] = Factory(dict)
    # The workspace as the host sees it (agents that read files the sandbox wrote, e.g. a CLI's log).
    host_workspace: str = ""


class Agent(ABC):
    """Register a factory for subclasses through `automedbench_register_agents`."""

    name: str = ""
    # Continue messages after a reply with no tool call; None: the task's `text_reply_continues`.
    continues: int | None = None

    def start(self, context: AgentContext) -> None:  # noqa: B027 - optional hook
        """Called once before the first turn."""

    @abstractmethod
    def next_turn(self, messages: list[dict[str, Any]]) -> AgentTurn:
        """Messages are OpenAI-style dicts (system, user, assistant with tool_calls, tool)."""

    def drain_events(self) -> list[dict[str, Any]]:
        """Events only the agent saw (a CLI agent's own steps, API retries), written after each turn."""
        return []

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release clients and processes."""
