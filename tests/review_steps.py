"""A scripted agent for the review tests: runs given code steps through the real harness, then submits."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest
from automedbench.agent import Agent
from automedbench.hookspecs import hookimpl
from automedbench.records import AgentTurn, Result, ToolCall
from automedbench.runner import Run, RunOptions
from automedbench.serialize import read_json

DEMO = "segmentation/demo"


class Steps(Agent):
    """Runs the given (language, code) steps one per turn, then submits ("raw": code is the arguments string)."""

    name = "review-steps"

    def __init__(self, steps: list[list[str]] | None = None, submit: bool = True) -> None:
        self.steps = list(steps or [])
        self.submit = submit
        self.turn = 0

    def next_turn(self, messages):
        self.turn += 1
        if self.turn <= len(self.steps):
            language, code = self.steps[self.turn - 1]
            args = code if language == "raw" else json.dumps({"language": language, "code": code})
            return AgentTurn(f"step {self.turn}", [ToolCall(f"c{self.turn}", "execute_code", args)])
        if self.submit and self.turn == len(self.steps) + 1:
            return AgentTurn("submit", [ToolCall("s", "submit_results", "{}")])
        return AgentTurn("done", [])


def register_agent(reg, cls: type[Agent]):
    """Add a test agent class to a registry under its `name` (once; later calls are no-ops)."""
    module = types.ModuleType(f"review_agent_{cls.name}")

    @hookimpl
    def automedbench_register_agents(register):
        register(cls.name, cls, "review test agent")

    module.automedbench_register_agents = automedbench_register_agents
    reg.add_plugin(module, name=f"review_agent_{cls.name}")
    return reg


def register_steps(reg):
    """The registry with the Steps agent in it."""
    return register_agent(reg, Steps)


def run_steps(reg, out: Path, data_root: Path, steps, sandbox: str = "local") -> tuple[Result, Path]:
    runner = Run(RunOptions(DEMO, "lite", Steps.name, sandbox=sandbox, out=out, data_root=data_root,
                            agent_options={"steps": steps}, keep_workspace=True), reg)
    result = runner.execute()
    assert read_json(runner.run_dir / "result.json", Result) == result
    return result, runner.run_dir


def exec_events(run_dir: Path) -> list[dict]:
    from automedbench.trajectory import read_events

    return [e for e in read_events(run_dir / "trajectory.jsonl") if e.get("name") == "execute_code"]


def need_bwrap() -> None:
    from automedbench.sandboxes.local import bwrap_path

    if bwrap_path() is None:
        pytest.skip("bubblewrap not usable")
