"""Every run ends in exactly one state and always leaves a result.json."""

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


class Crashing(Agent):
    """Runs one command, then its backend fails."""

    name = "crashing"

    def __init__(self) -> None:
        self.turns = 0

    def next_turn(self, messages):
        self.turns += 1
        if self.turns == 1:
            return AgentTurn("ls", [ToolCall("c1", "execute_code", json.dumps({"language": "bash", "code": "ls"}))])
        raise ConnectionError("model endpoint unreachable")


class Interrupted(Agent):
    name = "interrupted"

    def next_turn(self, messages):
        raise KeyboardInterrupt


class Looping(Agent):
    """Never stops on its own: budgets must end it."""

    name = "looping"

    def next_turn(self, messages):
        code = json.dumps({"language": "bash", "code": "sleep 0.2; echo tick"})
        return AgentTurn("again", [ToolCall(f"c{len(messages)}", "execute_code", code)])


class UnknownTool(Agent):
    name = "unknown-tool"

    def __init__(self) -> None:
        self.done = False

    def next_turn(self, messages):
        if self.done:
            return AgentTurn("bye", [])
        self.done = True
        return AgentTurn("", [ToolCall("x", "rm_rf", "{}"), ToolCall("y", "execute_code", '{"language": "cobol"}')])


@pytest.fixture(scope="module")
def reg_with_test_agents(reg):
    module = types.ModuleType("state_test_agents")

    @hookimpl
    def automedbench_register_agents(register):
        for cls in (Crashing, Interrupted, Looping, UnknownTool):
            register(cls.name, cls, "test agent")

    module.automedbench_register_agents = automedbench_register_agents
    reg.add_plugin(module, name="state_test_agents")
    return reg


def run(reg, tmp_path, data_root, agent, **kw):
    runner = Run(RunOptions(DEMO, "lite", agent, out=tmp_path, data_root=data_root, **kw), reg)
    result = runner.execute()
    stored = read_json(runner.run_dir / "result.json", Result)
    assert stored == result
    return result, runner.run_dir


def test_agent_backend_failure_is_agent_failure_and_still_scored(reg_with_test_agents, tmp_path, data_root, staged):
    result, _ = run(reg_with_test_agents, tmp_path, data_root, "crashing")
    assert result.state == "agent_failure" and result.end_reason == "agent_error"
    assert "model endpoint unreachable" in result.error
    assert result.stage("S4").score == 0.0 and result.aggregate.rating == "F"
    assert result.aggregate.overall is not None  # the run is scored: the failure is the agent's


def test_cancel_leaves_a_cancelled_record(reg_with_test_agents, tmp_path, data_root, staged):
    result, run_dir = run(reg_with_test_agents, tmp_path, data_root, "interrupted")
    assert result.state == "cancelled" and result.stages == [] and result.aggregate.overall is None
    assert (run_dir / "trajectory.jsonl").exists()


def test_turn_and_time_budgets(reg_with_test_agents, tmp_path, data_root, staged):
    result, _ = run(reg_with_test_agents, tmp_path, data_root, "looping", max_turns=3)
    assert result.end_reason == "turn_limit" and result.runtime.turns == 3
    assert any(c.code == "H-BUDGET" for c in result.error_codes)
    result, _ = run(reg_with_test_agents, tmp_path, data_root, "looping", time_limit_s=1.0)
    assert result.end_reason == "time_limit" and 2 <= result.runtime.turns <= 8


def test_unknown_tool_and_bad_arguments_are_answered(reg_with_test_agents, tmp_path, data_root, staged):
    from automedbench.trajectory import read_events

    result, run_dir = run(reg_with_test_agents, tmp_path, data_root, "unknown-tool")
    errors = [e.get("error") for e in read_events(run_dir / "trajectory.jsonl") if e["type"] == "tool"]
    assert errors == ["unknown_tool", "bad_arguments"]
    assert result.state == "scored"


def test_sandbox_failure_is_infrastructure_failure(reg, tmp_path, data_root, staged, monkeypatch):
    from automedbench.sandboxes import local

    def broken(self, language, code, timeout_s):
        raise OSError("sandbox exploded")

    monkeypatch.setattr(local.LocalSession, "execute", broken)
    result, _ = run(reg, tmp_path, data_root, "reference")
    assert result.state == "infrastructure_failure" and "sandbox exploded" in result.error
    assert result.aggregate.overall is None and result.stages == []


def test_gpu_is_given_explicitly(tmp_path):
    from automedbench.sandbox import SandboxSpec
    from automedbench.sandboxes.local import LocalSandbox

    (tmp_path / "ws").mkdir()
    (tmp_path / "pub").mkdir()
    none = LocalSandbox().open(SandboxSpec(tmp_path / "ws", tmp_path / "pub"))
    one = LocalSandbox().open(SandboxSpec(tmp_path / "ws", tmp_path / "pub", gpus=["1"]))
    probe = "import os; print(repr(os.environ['CUDA_VISIBLE_DEVICES']))"
    try:
        assert none.execute("python", probe, 10).stdout.strip() == "''"
        assert one.execute("python", probe, 10).stdout.strip() == "'1'"
    finally:
        none.close()
        one.close()


class NeighbourReads(Agent):
    """Between its turns, the *host* reads a private reference — as a concurrent run's evaluator would."""

    name = "neighbour-reads"

    def __init__(self, private: str = "") -> None:
        self.private = private
        self.turns = 0

    def next_turn(self, messages):
        self.turns += 1
        if self.turns == 1:
            for ref in sorted(Path(self.private).rglob("*.nii.gz"))[:2]:
                ref.read_bytes()
            return AgentTurn("", [ToolCall("c1", "execute_code", json.dumps({"language": "bash", "code": "true"}))])
        return AgentTurn("done", [])


@pytest.mark.parametrize("sandbox,breached", [("local", False), ("local-plain", True)])
def test_other_processes_reading_private_data(reg, tmp_path, data_root, staged, sandbox, breached):
    """With filesystem isolation only the run's own decoys are watched; without it any read is a breach."""
    from automedbench.sandboxes.local import bwrap_path

    if sandbox == "local" and bwrap_path() is None:
        pytest.skip("bubblewrap not usable")
    module = types.ModuleType(f"neighbour_{sandbox}")

    @hookimpl
    def automedbench_register_agents(register):
        register(f"neighbour-{sandbox}", lambda: NeighbourReads(str(staged.private)), "test agent")

    module.automedbench_register_agents = automedbench_register_agents
    reg.add_plugin(module, name=f"neighbour_{sandbox}")
    result, _ = run(reg, tmp_path, data_root, f"neighbour-{sandbox}", sandbox=sandbox)
    assert result.isolation.breached is breached
