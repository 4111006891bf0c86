"""A demanding user's walk, round 20: a researcher benchmarking the installed agent systems they use (Claude Code,
Codex, Gemini CLI, Qwen Code, OpenHands, mini-swe-agent) through the command line, before any program runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import test_cli_newuser
from automedbench.cli import main
from automedbench_models.systems import SYSTEMS
from click.testing import CliRunner
from test_ux_round18 import _one_line  # exit 2 and one line on stderr holding the needle

cli = test_cli_newuser.cli  # the new user's command line (CliRunner, errors as a pipe sees them), shared


@pytest.mark.parametrize("agent,option,needle", [
    ("codex", "modle=gpt-5-mini", "unknown codex agent option(s) modle (did you mean 'model'?); known: "),
    ("claude-code", "base-url=http://127.0.0.1:9/v1", "unknown claude-code agent option(s) base-url (did you mean "
                                                      "'base_url'?)"),
    # read by other systems only: before, silently ignored (a Claude Code run has no provider to choose)
    ("claude-code", "provider=anthropic", "unknown claude-code agent option(s) provider; known: "),
    ("gemini-cli", "wire_api=chat", "unknown gemini-cli agent option(s) wire_api; known: "),
    ("openhands", "config=textbased", "unknown openhands agent option(s) config; known: "),
])
def test_a_misspelt_or_foreign_option_of_an_installed_system_is_one_line(cli, tmp_path, agent, option, needle):
    """`--agent codex --agent-option modle=gpt-5-mini` was a 25-line TypeError traceback (exit 1); an option another
    system reads (provider= on claude-code) was dropped without a word, so the run used a model the user did not
    ask for. Now one line, exit 2, naming the nearest option and this system's own, before anything is written."""
    result = cli("run", "--task", "toy/vowels", "--agent", agent, "--agent-option", "api_key_env=none",
                 "--agent-option", option, "--out", tmp_path / "runs")
    _one_line(result, needle)
    known = result.stderr.strip().split("known: ", 1)[1].split(", ")
    assert sorted(known) == sorted(SYSTEMS[agent].options()) and "model" in known, result.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_mini_swe_agents_config_takes_only_textbased(cli, tmp_path):
    """`config=text` (for `textbased`) silently ran the tool-call config against a model without tool calls."""
    result = cli("run", "--task", "toy/vowels", "--agent", "mini-swe-agent", "--agent-option", "api_key_env=none",
                 "--agent-option", "config=text", "--out", tmp_path / "runs")
    _one_line(result, "mini-swe-agent: config must be textbased (for a model without tool calls) or left out, not "
                      "'text'")


def test_plugins_lists_every_option_each_installed_system_takes():
    """`automedbench plugins` said `model=, base_url=, api_key_env=, bin=` for every system: args=, prices= and the
    per-system provider=, wire_api=, config= (all in the README) were not discoverable from the command line."""
    result = CliRunner().invoke(main, ["plugins"], prog_name="automedbench", catch_exceptions=False)
    assert result.exit_code == 0, result.output
    descriptions: dict[str, str] = {}  # an agent's description, its wrapped table lines joined
    name = ""
    for line in result.output.splitlines():
        cells = [cell.strip() for cell in line.strip()[1:-1].split("│")]
        if len(cells) != 5:
            continue
        if cells[1]:
            name = cells[1] if cells[0] == "agent" else ""
        if name:
            descriptions[name] = f"{descriptions.get(name, '')} {cells[4]}".strip()
    for name, system in SYSTEMS.items():
        assert "run inside the sandbox" in descriptions.get(name, ""), (name, result.output)
        for option in system.options():
            assert f" {option}=" in descriptions[name], (name, option, descriptions[name])
    assert "wire_api" in SYSTEMS["codex"].options() and "config" in SYSTEMS["mini-swe-agent"].options()


@pytest.mark.parametrize("args,needle", [
    (["-T", "task=toy/vowel"], "automedbench: unknown task 'toy/vowel' (did you mean 'toy/vowels'?); known: "),
    (["-T", "task=toy/vowels", "-T", "tier=max"], "automedbench: task toy/vowels has no 'max' tier; it offers lite"),
])
def test_a_wrong_task_or_tier_in_inspect_eval_is_its_message_not_a_traceback(tmp_path, data_root, args, needle):
    """`inspect eval automedbench_inspect/automedbench -T task=toy/vowel` printed an 80-line exception-group
    traceback with the one line that mattered at its end; the task now raises inspect's own prerequisite error,
    which inspect prints alone. Through the real `inspect` command (~4 CPU-s: inspect_ai's import)."""
    pytest.importorskip("inspect_ai")
    env = {**os.environ, "AUTOMEDBENCH_DATA": str(data_root), "INSPECT_LOG_DIR": str(tmp_path / "logs")}
    proc = subprocess.run([str(Path(sys.executable).parent / "inspect"), "eval", "automedbench_inspect/automedbench",
                           *args, "--model", "mockllm/model", "--display", "plain"], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in output, output
    assert needle in " ".join(output.split()), output  # rich wraps the line at the terminal's width
    assert not (tmp_path / "runs").exists()


def test_a_program_that_hangs_before_its_first_model_call_is_named_in_the_trajectory(cli, tmp_path):
    """A Claude Code stuck before its first request (a login prompt, a first-run wizard) ended as a bare "run
    stopped: time_limit", its `model_gateway` event counting 0 calls and nothing saying so. A stub `claude` that
    sleeps stands in for the real one (~1 CPU-s, 3 s wall)."""
    (tmp_path / "bin").mkdir()  # apart from the run folder: a program folder overlapping it is refused
    stub = tmp_path / "bin" / "claude"
    stub.write_text("#!/bin/bash\nsleep 600\n")
    stub.chmod(0o755)
    result = cli("run", "--task", "toy/vowels", "--agent", "claude-code", "--agent-option", "api_key_env=none",
                 "--agent-option", f"bin={stub}", "--agent-option", "base_url=http://127.0.0.1:9",
                 "--time-limit", "3", "--out", tmp_path / "runs")
    assert "run stopped: time_limit" in result.output, result.output
    (run,) = (tmp_path / "runs").iterdir()
    events = [json.loads(line) for line in (run / "trajectory.jsonl").read_text().splitlines()]
    assert [e["calls"] for e in events if e["type"] == "model_gateway"] == [0]
    notes = [e["note"] for e in events if e["type"] == "note"]
    assert any(n.startswith("claude-code made no model call: it ended, or was stopped at the run's limit, before")
               for n in notes), notes
