"""The replay agent (re-run a stored trajectory) and installed CLI agents (a fake CLI script)."""

from __future__ import annotations

import hashlib
import json
import os

import pytest
from automedbench.agent import TOOLS, AgentContext
from automedbench.errors import UserError
from automedbench.runner import Run, RunOptions
from automedbench.trajectory import read_events
from automedbench_models.cli_agent import CliAgent, CliAgentSpec, parse_claude_stream_json
from automedbench_models.replay import ReplayAgent

DEMO = "segmentation/demo"

FAKE_CLI = r'''#!/usr/bin/env python3
"""A stand-in coding-agent CLI: reads the brief, runs two commands, writes its own log."""
import argparse, hashlib, json, pathlib, subprocess

p = argparse.ArgumentParser()
p.add_argument("--brief"); p.add_argument("--log"); p.add_argument("--workspace")
a = p.parse_args()
brief = pathlib.Path(a.brief).read_text()
steps = [{"type": "message", "content": "brief sha256 " + hashlib.sha256(brief.encode()).hexdigest()}]
for cmd in ("mkdir -p plan && printf '# Plan\\n1. load\\n2. segment\\n' > plan/plan.md && ls plan", "false"):
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, cwd=a.workspace)
    steps.append({"type": "tool", "language": "bash", "code": cmd, "exit_code": r.returncode,
                  "stdout": r.stdout, "stderr": r.stderr})
pathlib.Path(a.log).write_text("\n".join(json.dumps(s) for s in steps) + "\n")
print("fake cli done")
'''


def _run(reg, data_root, out, agent: str, **options):
    runner = Run(RunOptions(DEMO, "lite", agent, out=out, data_root=data_root, agent_options=options), reg)
    return runner.execute(), runner.run_dir


# ------------------------------------------------------------------ replay


def test_replay_of_a_reference_run_reproduces_its_scores(run_agent, reg, data_root, tmp_path):
    original, original_dir = run_agent("reference")
    result, run_dir = _run(reg, data_root, tmp_path, "replay", trajectory=str(original_dir / "trajectory.jsonl"))
    assert result.end_reason == "submitted"
    assert {s.stage: s.score for s in result.stages} == {s.stage: s.score for s in original.stages}
    assert result.task.strict == original.task.strict
    old = [e for e in read_events(original_dir / "trajectory.jsonl") if e["type"] == "assistant"]
    new = [e for e in read_events(run_dir / "trajectory.jsonl") if e["type"] == "assistant"]
    assert [e["tool_calls"] for e in new] == [e["tool_calls"] for e in old]
    assert not any("[replay:" in e["content"] for e in new)  # no divergences


def _trajectory(tmp_path, data_dir="/old/data", ws="/old/ws"):
    path = tmp_path / "trajectory.jsonl"
    code = f"ls {data_dir} > {ws}/outputs/list.txt"
    events = [{"type": "start", "data_dir": data_dir, "workspace_dir": ws},
              {"type": "assistant", "turn": 1, "content": "listing", "reasoning": "why not",
               "tool_calls": [{"id": "c1", "name": "execute_code",
                               "arguments": json.dumps({"language": "bash", "code": code})}]},
              {"type": "tool", "turn": 1, "call_id": "c1", "name": "execute_code", "exit_code": 0}]
    path.write_text("\n".join(json.dumps(e) for e in events) + "\n")
    return path


def test_replay_rewrites_paths_and_reports_divergent_exit_codes(tmp_path):
    agent = ReplayAgent(trajectory=str(_trajectory(tmp_path)))
    agent.start(AgentContext(None, "lite", "", "", TOOLS, "/data/public", "/workspace"))
    turn = agent.next_turn([])
    assert json.loads(turn.tool_calls[0].arguments)["code"] == "ls /data/public > /workspace/outputs/list.txt"
    assert turn.reasoning == "why not"
    end = agent.next_turn([{"role": "tool", "tool_call_id": "c1", "content": "exit_code: 2\nstdout:\n"}])
    assert end.tool_calls == [] and "call c1 exited 2, recorded 0" in end.content and agent.divergences == 1


def test_replay_needs_a_trajectory(tmp_path):
    with pytest.raises(UserError, match="needs --agent-option trajectory="):
        ReplayAgent()
    with pytest.raises(UserError, match="no such trajectory"):
        ReplayAgent(trajectory=str(tmp_path / "nope.jsonl"))


# ------------------------------------------------------------------ installed CLI agents


@pytest.fixture
def cli_spec(tmp_path):
    (tmp_path / "fake_cli.py").write_text(FAKE_CLI)
    spec = tmp_path / "fake-cli.yaml"
    spec.write_text("name: fake-cli\ninstall: echo installing fake-cli\nfiles: {fake-cli: fake_cli.py}\n"
                    "command: python3 {dir}/fake-cli --brief {brief} --log {log} --workspace {workspace}\n"
                    "log_format: steps-jsonl\n")
    return spec


def test_cli_agent_runs_in_the_sandbox_and_its_log_enters_the_trajectory(cli_spec, reg, data_root, tmp_path):
    result, run_dir = _run(reg, data_root, tmp_path / "runs", "cli", spec=str(cli_spec))
    assert result.state == "scored" and result.end_reason == "submitted" and result.runtime.turns == 2
    events = read_events(run_dir / "trajectory.jsonl")
    real = [e for e in events if e["type"] == "tool" and not e.get("imported")]
    assert [e["name"] for e in real] == ["execute_code", "submit_results"]
    assert real[0]["exit_code"] == 0 and "installing fake-cli" in real[0]["stdout"]
    assert "fake cli done" in real[0]["stdout"] and "[cli agent fake-cli exited 0]" in real[0]["stdout"]
    imported = [e for e in events if e.get("imported")]
    assert [(e["type"], e["turn"]) for e in imported] == [("cli_message", 1), ("tool", 1), ("tool", 1)]
    brief_sha = hashlib.sha256((run_dir / "brief.md").read_bytes()).hexdigest()
    assert imported[0]["content"] == f"brief sha256 {brief_sha}"  # the CLI got exactly the brief
    assert [e["exit_code"] for e in imported[1:]] == [0, 1] and imported[1]["stdout"].strip() == "plan.md"
    assert (run_dir / "artefacts" / "plan.md").read_text().startswith("# Plan")
    assert result.stage("S4").score == 0.0  # the fake wrote no outputs, and the score says so


def test_cli_agent_that_fails_does_not_submit(reg, data_root, tmp_path):
    spec = CliAgentSpec("failing-cli", command="echo giving up; exit 3")
    agent = CliAgent(spec)
    agent.start(AgentContext(None, "lite", "brief", "Begin.", TOOLS, "/data", "/ws"))
    first = agent.next_turn([])
    script = json.loads(first.tool_calls[0].arguments)["code"]
    assert "echo giving up; exit 3" in script and "base64 -d > /ws/.agent_cli/brief.md" in script
    second = agent.next_turn([{"role": "tool", "tool_call_id": "cli_run", "content": "exit_code: 3\nstdout:\n"}])
    assert second.tool_calls == [] and "exited 3" in second.content


def test_cli_log_that_is_a_symlink_is_not_read(tmp_path):
    ws = tmp_path / "ws"
    (ws / ".agent_cli").mkdir(parents=True)
    secret = tmp_path / "secret.jsonl"
    secret.write_text(json.dumps({"type": "message", "content": "private"}) + "\n")
    os.symlink(secret, ws / ".agent_cli" / "log.jsonl")
    agent = CliAgent(CliAgentSpec("x", command="true"))
    agent.start(AgentContext(None, "lite", "", "", TOOLS, "/data", "/workspace", host_workspace=str(ws)))
    agent.next_turn([])
    assert agent.drain_events() == []
    (ws / ".agent_cli" / "log.jsonl").unlink()
    (ws / ".agent_cli" / "log.jsonl").write_text(secret.read_text())
    assert agent.drain_events() == [{"type": "cli_message", "content": "private", "call_id": "cli_step_001"}]


def test_claude_stream_json_log_is_read_into_steps():
    lines = [
        {"type": "system", "subtype": "init"},
        {"type": "assistant", "message": {"content": [
            {"type": "text", "text": "Listing files."},
            {"type": "tool_use", "id": "tu1", "name": "Bash", "input": {"command": "ls /data"}}]}},
        {"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": "tu1", "content": [{"type": "text", "text": "case_000"}]}]}},
        {"type": "assistant", "message": {"content": [
            {"type": "tool_use", "id": "tu2", "name": "Bash", "input": {"command": "cat missing"}}]}},
        {"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": "tu2", "content": "No such file", "is_error": True}]}},
    ]
    events = parse_claude_stream_json("\n".join(json.dumps(x) for x in lines) + "\n{torn")
    assert [e["type"] for e in events] == ["cli_message", "tool", "tool"]
    assert (events[1]["code"], events[1]["stdout"], events[1]["exit_code"]) == ("ls /data", "case_000", 0)
    assert (events[2]["code"], events[2]["exit_code"]) == ("cat missing", 1)


def test_cli_spec_errors_are_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("command: x\nlog_format: mystery\n")
    with pytest.raises(UserError, match="unknown log_format 'mystery'"):
        CliAgent(spec=str(bad))
    bad.write_text("install: x\n")
    with pytest.raises(UserError, match="needs at least 'command'"):
        CliAgent(spec=str(bad))


def test_cli_log_folder_that_is_a_symlink_is_not_followed(tmp_path):
    """The log's folder swapped for a symlink to a host folder: the harness must not read through it."""
    ws = tmp_path / "ws"
    ws.mkdir()
    host = tmp_path / "host"
    host.mkdir()
    (host / "log.jsonl").write_text(json.dumps({"type": "message", "content": "host file"}) + "\n")
    os.symlink(host, ws / ".agent_cli")
    agent = CliAgent(CliAgentSpec("x", command="true"))
    agent.start(AgentContext(None, "lite", "", "", TOOLS, "/data", "/workspace", host_workspace=str(ws)))
    agent.next_turn([])
    assert agent.drain_events() == []
