"""What a user can do about a run that did not end in a submission, one line by how it ended: `show` printed only
the state and the error, and the run page the same, so a failed, cancelled or cut-off run said why but not what
next. Read by the report (`show`, `run`) and the run page (`automedbench view`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import errors


def next_step(end_reason: str, header: Mapping[str, Any]) -> str:
    """The next step for a run that ended `end_reason` (its `header`: task, tier, agent), or "" when the run ended
    as it should (submitted) or nothing the user sets would change it (a breach). An agent that stopped without
    submitting is told where to read why: a crashed installed CLI agent ended "scored (agent_stopped)", F, with no
    word of its exit or where its error was."""
    again = (f"automedbench run --task {header.get('task', 'TASK')} --tier {header.get('tier', 'lite')} "
             f"--agent {header.get('agent', 'AGENT')}")
    steps = {
        errors.END_AGENT_ERROR: "the agent failed, not the task: fix what the error names (for a model: its "
                                "endpoint, key or name; for an installed system: its program), then run again: "
                                f"{again}",
        errors.END_INFRA_ERROR: "the harness failed, not the agent, and the run is not scored: run it again as it "
                                f"was ({again}); a sweep given the same --out retries it",
        errors.END_PROVIDER_DOWN: "the agent's model provider did not answer, and the run is not scored: check "
                                  f"the provider (its base_url, its status), then run it again ({again}); a sweep "
                                  "given the same --out retries it",
        errors.END_CANCELLED: "the run was interrupted and is not scored: run it again; a sweep given the same "
                              "--out runs only what did not finish",
        errors.END_AGENT_STOPPED: "the agent ended the run itself, without calling submit_results, and was scored "
                                  "on what it had written: its last reply and its last call's output say why (the "
                                  "run page's Trajectory, or trajectory.jsonl in the run folder); an installed CLI "
                                  "agent stops so when its program exits non-zero",
        errors.END_TIME_LIMIT: "the agent spent the run's whole time budget and was scored as it stood; to give "
                               "it longer: --time-limit SECONDS",
        errors.END_TURN_LIMIT: "the agent spent the run's whole turn budget and was scored as it stood; to give "
                               "it more: --max-turns N",
        errors.END_REPEATED_CALLS: "the agent repeated one call with the same answer until the run stopped it; to "
                                   "allow more repeats: --repeat-limit N",
        errors.END_NO_TOOL_CALL: "the model answered in text, not tool calls: for a model without tool calling, "
                                 "--agent-option text_tool_calls=true (chat agents) reads the calls from its text",
    }
    return steps.get(end_reason, "")
