"""What the bridge takes from the core beyond the component contract, in one place: the runner and its options,
the process-wide registry (from `automedbench.engine`), the agent's turn records, the end reason of a stopped agent
and the notice a repeated call gets (from `automedbench.api`). Nothing else in this package imports the core."""

from __future__ import annotations

from pathlib import Path

from automedbench.api import (
    END_AGENT_STOPPED,
    Agent,
    AgentContext,
    AgentError,
    AgentTurn,
    ExecResult,
    Result,
    Sandbox,
    SandboxSession,
    ToolCall,
    UserError,
    dumps,
    open_path,
    read_regular,
)
from automedbench.engine import REPEAT_NOTICE_MARK as NOTICE_MARK
from automedbench.engine import Run, RunOptions, registry


def open_dir(path: str | Path) -> int | None:
    """A descriptor for the folder `path` itself, opened without following a symlink; None when it is none."""
    return open_path(Path(path), "")


__all__ = ["END_AGENT_STOPPED", "NOTICE_MARK", "Agent", "AgentContext", "AgentError", "AgentTurn", "ExecResult",
           "Result", "Run", "RunOptions", "Sandbox", "SandboxSession", "ToolCall", "UserError", "dumps", "open_dir",
           "read_regular", "registry"]
