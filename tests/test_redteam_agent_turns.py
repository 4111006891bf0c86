"""Red-team round 6: turns an agent returns that the runner cannot act on, through the real runner (toy track).

An agent is a plugin (or a replayed trajectory file): before, a tool call whose name or arguments were not text,
a token count given as text, a tool_calls that was not a list, bytes as content or a drained event that was not
an object raised inside the runner and the run ended `infrastructure_failure` (a sweep retries those and the
leaderboard never counts them: a free re-roll); a NaN cost raised out of `execute()` with no result written.
Now each ends `agent_failure` with the reason, and odd but harmless values (no content, an integer id, a tuple of
calls, numpy counts) still score, the counts recorded as plain numbers."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from automedbench.agent import Agent
from automedbench.records import AgentTurn, ToolCall
from automedbench.testing import register_agent, register_toy_track, run_task

CODE = json.dumps({"language": "python", "code": "print(1)"})
MALFORMED = {
    "arguments-object": (lambda: AgentTurn("x", [ToolCall("c1", "execute_code", {"language": "python"})]),
                         "name and arguments must be text"),
    "name-null": (lambda: AgentTurn("x", [ToolCall("c1", None, CODE)]), "name and arguments must be text"),
    "tokens-text": (lambda: AgentTurn("x", [], tokens_in="12"), "tokens_in is '12'"),
    "cost-nan": (lambda: AgentTurn("x", [], cost_usd=math.nan), "cost_usd is nan"),
    "calls-null": (lambda: AgentTurn("x", None), "tool_calls is NoneType"),
    "content-bytes": (lambda: AgentTurn(b"x", []), "content is bytes"),
}
HARMLESS = {"content-null": lambda: AgentTurn(None, []),
            "id-int": lambda: AgentTurn("x", [ToolCall(5, "execute_code", CODE)]),
            "calls-tuple": lambda: AgentTurn("x", (ToolCall("c1", "execute_code", CODE),)),
            "numpy-counts": lambda: AgentTurn("x", [], tokens_in=np.int64(12), cost_usd=np.float32(0.5))}


def one_turn_agent(name: str, make, drained=None) -> str:
    class OneTurn(Agent):
        def __init__(self, **_: str) -> None:
            self.turn = 0

        def next_turn(self, messages):
            self.turn += 1
            return make() if self.turn == 1 else AgentTurn("done", [], final=True)

        def drain_events(self):
            return list(drained) if drained is not None and self.turn == 1 else []

    OneTurn.name = f"redteam6-{name}"
    register_toy_track()
    register_agent(OneTurn)
    return OneTurn.name


@pytest.mark.slow  # one toy run through the real runner each (about a second, more under load)
@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_turn_is_the_agents_failure(tmp_path, name):
    make, reason = MALFORMED[name]
    result, run_dir = run_task("toy/vowels", one_turn_agent(name, make), out=tmp_path / "runs",
                               data_root=tmp_path / "data")
    assert (result.state, result.end_reason) == ("agent_failure", "agent_error"), result.error
    assert "malformed turn" in result.error and reason in result.error, result.error
    assert (run_dir / "result.json").is_file()


@pytest.mark.slow  # a toy run through the real runner
def test_a_drained_event_that_is_not_an_object_is_the_agents_failure(tmp_path):
    result, _ = run_task("toy/vowels", one_turn_agent("drain", lambda: AgentTurn("x", []), ["not an object"]),
                         out=tmp_path / "runs", data_root=tmp_path / "data")
    assert (result.state, result.end_reason) == ("agent_failure", "agent_error"), result.error
    assert "cannot hold" in result.error


@pytest.mark.slow  # toy runs through the real runner
@pytest.mark.parametrize("name", sorted(HARMLESS))
def test_odd_but_harmless_turns_still_score(tmp_path, name):
    result, _ = run_task("toy/vowels", one_turn_agent(name, HARMLESS[name]), out=tmp_path / "runs",
                         data_root=tmp_path / "data")
    assert result.state == "scored", result.error
    assert type(result.runtime.tokens_in) is int and type(result.runtime.cost_usd) is float


@pytest.mark.slow  # a toy run through the real runner
def test_a_replayed_trajectory_with_a_null_tool_name_is_the_agents_failure(tmp_path):
    """The replay agent reads a trajectory file: one whose call names no tool (null) ended the run
    `infrastructure_failure` before."""
    path = tmp_path / "crafted.jsonl"
    events = [{"type": "start", "data_dir": "/data/public", "workspace_dir": "/workspace"},
              {"type": "assistant", "turn": 1, "content": "x", "tool_calls": [{"id": "c1", "name": None,
                                                                                 "arguments": CODE}]}]
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    register_toy_track()
    result, _ = run_task("toy/vowels", "replay", out=tmp_path / "runs", data_root=tmp_path / "data",
                         agent_options={"trajectory": str(path)})
    assert (result.state, result.end_reason) == ("agent_failure", "agent_error"), result.error
