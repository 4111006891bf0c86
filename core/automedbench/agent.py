"""The Agent interface: anything that, shown the conversation so far, returns its next turn."""

from __future__ import annotations

import json
import math
import numbers
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from attrs import Factory, define

from .records import AgentTurn, TaskSpec, ToolCall

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
class ReplyHint:
    """Why a reply ran nothing: `kind` ("none" from the core; a hint plugin's no_call, invalid_json, ...), a
    one-line `detail`, and the `message` the model is told (`automedbench_reply_hint`)."""

    kind: str
    detail: str
    message: str


def execute_code_example(data_dir: str = "") -> str:
    """One valid `execute_code` call, as a fenced JSON block (the shape text-call recovery accepts)."""
    where = json.dumps(data_dir) if data_dir else "'.'"
    call = {"name": "execute_code",
            "arguments": {"language": "python", "code": f"import os; print(sorted(os.listdir({where}))[:20])"}}
    return "```json\n" + json.dumps(call) + "\n```"


def continue_message(lead: str, tool_names: list[str], example: str) -> str:
    """What a reply that ran nothing is answered with: what was wrong (`lead`), then one valid call to copy."""
    return (f"{lead} Nothing was run. Call one of the tools ({', '.join(tool_names)}) through your tool-calling "
            f"interface; if you cannot, reply with exactly one block like this and nothing else:\n{example}")


def generic_hint(data_dir: str = "") -> ReplyHint:
    """The core's answer to a reply without a tool call when no plugin diagnoses it."""
    message = continue_message("Your reply had no tool call.", [str(t["name"]) for t in TOOLS],
                               execute_code_example(data_dir))
    return ReplyHint("none", "no tool call found", message)


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
    # The run's budgets (an installed agent enforces them on its model calls from outside the sandbox).
    max_turns: int = 0
    time_limit_s: float = 0.0
    # Where an agent whose program runs inside one sandbox call records the steps the harness itself observed
    # (`observed.ObservedSteps`: an installed agent's model gateway); None outside a run.
    steps: Any = None


class Agent(ABC):
    """Register a factory for subclasses through `automedbench_register_agents`."""

    name: str = ""
    # Continue messages after a reply with no tool call; None: the task's `text_reply_continues`.
    continues: int | None = None
    # True: each call may run for the rest of the time limit (an installed agent's whole session is one call),
    # not only the per-call timeout.
    long_calls: bool = False
    # The address space (MB) the agent's program needs at least: a runtime may reserve far more than it uses (Node
    # reserves ~10 GB per WebAssembly memory). The memory limit itself (cgroup) stays the run's. 0: no need.
    address_space_mb: int = 0
    # True: each execute_code call runs the agent's own program (an installed CLI's session), not a step of the
    # work; the call is recorded as a `session` and the steps inside it are those recorded through
    # `AgentContext.steps` (none, for a program the harness cannot watch).
    session_calls: bool = False

    def sandbox_binds(self) -> list[Path]:
        """Host folders the agent's own program lives in (an installed CLI, its runtime), mounted read-only at the
        same path inside the sandbox. Asked before the sandbox opens; default none."""
        return []

    def check_task(self, track: Any, task: TaskSpec, tier: str) -> None:  # noqa: B027 - optional hook
        """Raise UserError when this agent cannot work on the task at all; asked before any run folder or disk
        reservation exists, so the refusal is the one line a user sees (default: every task)."""

    def start(self, context: AgentContext) -> None:  # noqa: B027 - optional hook
        """Called once before the first turn."""

    @abstractmethod
    def next_turn(self, messages: list[dict[str, Any]]) -> AgentTurn:
        """Messages are OpenAI-style dicts (system, user, assistant with tool_calls, tool)."""

    def drain_events(self) -> list[dict[str, Any]]:
        """Events only the agent saw (a CLI agent's own steps, API retries), written after each turn."""
        return []

    def other_models(self) -> dict[str, int]:
        """Model names the agent's own program asked for besides its configured model, each with how many requests,
        all served by the configured one (an installed agent's gateway pins them); asked once the agent phase is
        over, for the result (`Runtime.other_models`), so a reader sees helper-model calls. Default none."""
        return {}

    def program(self) -> str:
        """The agent's own program and its release (an installed system's `Codex CLI 0.171.0`), for the result
        (`Runtime.agent_program`): which release made a run. Default none."""
        return ""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release clients and processes."""


# What one reply may count: more has no plausible source, and the run's sums must stay numbers its record can hold
# (two replies of 1e308 USD summed to infinity; 10**5000 tokens have no decimal text Python will write)
MAX_REPLY_TOKENS = 10 ** 12
MAX_REPLY_COST_USD = 1e9
# What one reply may hold in characters (text, reasoning and every call's fields): four times the longest reply a
# model API returns (128k output tokens, about 512 KB). The trajectory keeps replies whole, on the host's disk.
MAX_REPLY_CHARS = 4 << 20


def turn_problem(reply: Any) -> str | None:
    """Why an agent's turn cannot be recorded or acted on (the runner ends the run as the agent's failure), or
    None. An agent is a plugin: a turn with a tool name that is not text, a token count that is text or a NaN
    cost would otherwise break the runner and pass for the harness's failure (retried, never counted). Numbers
    of other numeric types (numpy's) pass: `normalise_turn` makes them plain."""
    if not isinstance(reply, AgentTurn):
        return f"next_turn returned {type(reply).__name__}, not an AgentTurn"
    for name in ("content", "reasoning", "finish_reason"):
        if not isinstance(getattr(reply, name), str | None):
            return f"{name} is {type(getattr(reply, name)).__name__}, not text"
    for name in ("tokens_in", "tokens_out", "tokens_cached"):
        value = getattr(reply, name)
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 0 <= value <= MAX_REPLY_TOKENS:
            return f"{name} is {_shown(value)}, not a count (0 to {MAX_REPLY_TOKENS} a reply)"
    cost = reply.cost_usd
    if isinstance(cost, bool) or not isinstance(cost, numbers.Real) or not math.isfinite(cost) or \
            not 0 <= cost <= MAX_REPLY_COST_USD:
        return f"cost_usd is {_shown(cost)}, not a finite amount (0 to {MAX_REPLY_COST_USD:g} USD a reply)"
    if not isinstance(reply.tool_calls, list | tuple):
        return f"tool_calls is {type(reply.tool_calls).__name__}, not a list"
    for call in reply.tool_calls:
        if not isinstance(call, ToolCall):
            return f"a tool call is {type(call).__name__}, not a ToolCall"
        if not isinstance(call.name, str) or not isinstance(call.arguments, str):
            return (f"tool call {str(call.id)[:40]!r}: name and arguments must be text (got "
                    f"{type(call.name).__name__} and {type(call.arguments).__name__})")
        if isinstance(call.id, bool) or not isinstance(call.id, str | int | None) or \
                not isinstance(call.source, str | None):
            return f"tool call {str(call.id)[:40]!r}: its id and source must be text"
    size = reply_chars(reply)
    if size > MAX_REPLY_CHARS:
        return f"the reply holds {size} characters (at most {MAX_REPLY_CHARS} a reply)"
    return None


def reply_chars(reply: AgentTurn) -> int:
    """A reply's characters as the trajectory keeps them: text, reasoning and each call's id, name, arguments."""
    texts = [reply.content, reply.reasoning, reply.finish_reason]
    for call in reply.tool_calls:
        texts += [call.name, call.arguments, call.source, call.id if isinstance(call.id, str) else None]
    return sum(len(t) for t in texts if t)


MAX_OTHER_MODELS = 50  # names kept in a result; a plugin's longer list is cut
MAX_MODEL_NAME = 200


def other_models(agent: Agent) -> dict[str, int]:
    """`agent.other_models()` as a result can hold: text names (200 characters at most, 50 of them) with positive
    integer counts; anything else a plugin returns, or its failure, is left out (it names no model that served)."""
    try:
        reported = agent.other_models()
    except Exception:
        return {}
    if not isinstance(reported, dict):
        return {}
    out: dict[str, int] = {}
    for name, count in list(reported.items())[:MAX_OTHER_MODELS]:
        if isinstance(name, str) and type(count) is int and 0 < count <= MAX_REPLY_TOKENS:
            out[name[:MAX_MODEL_NAME]] = out.get(name[:MAX_MODEL_NAME], 0) + count
    return out


def agent_program(agent: Agent) -> str:
    """`agent.program()` as a result can hold: one line of printable text, 200 characters at most; anything else a
    plugin returns, or its failure, is left out."""
    try:
        named = agent.program()
    except Exception:
        return ""
    if not isinstance(named, str):
        return ""
    return " ".join(named.split())[:MAX_MODEL_NAME] if named.isprintable() else ""


def _shown(value: Any) -> str:
    """A reported number, briefly: an integer too long for decimal text by its size (repr would raise)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and abs(int(value)) > 10 ** 40:
        return f"an integer of {int(value).bit_length()} bits"
    return f"{value!r:.40}"


def normalise_turn(reply: AgentTurn) -> AgentTurn:
    """A turn `turn_problem` passed, with plain types the trajectory and the result can hold."""
    reply.tool_calls = list(reply.tool_calls)
    reply.tokens_in, reply.tokens_out = int(reply.tokens_in), int(reply.tokens_out)
    reply.tokens_cached, reply.cost_usd = int(reply.tokens_cached), float(reply.cost_usd)
    return reply
