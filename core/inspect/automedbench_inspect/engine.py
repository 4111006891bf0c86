"""What the bridge takes from the core beyond `automedbench.api`, in one place: the runner and its options, the
process-wide registry, the agent's turn records and the notice a repeated call gets. To be served by
`automedbench.engine` once it exists; nothing else in this package imports the core's internals."""

from __future__ import annotations

from automedbench.api import Agent, AgentContext, AgentError, Result, Sandbox, SandboxSession, UserError
from automedbench.errors import END_AGENT_STOPPED
from automedbench.fsutil import open_dir, read_regular
from automedbench.plugins import registry
from automedbench.records import AgentTurn, ExecResult, ToolCall
from automedbench.repeats import NOTICE_MARK
from automedbench.runner import Run, RunOptions
from automedbench.serialize import dumps

__all__ = ["END_AGENT_STOPPED", "NOTICE_MARK", "Agent", "AgentContext", "AgentError", "AgentTurn", "ExecResult",
           "Result", "Run", "RunOptions", "Sandbox", "SandboxSession", "ToolCall", "UserError", "dumps", "open_dir",
           "read_regular", "registry"]
