"""The agent systems people run, round 4: the current releases installed for real (Claude Code 2.1.337, Codex 0.171.0,
Gemini CLI 0.61.0, Qwen Code 0.24.4 from npm, mini-swe-agent 2.4.6 from pip, OpenHands 1.16.0 with uv) and run
through `automedbench run` and `inspect eval` against a scripted loopback model.

What broke or misled, each fixed here: a run did not say which release of the program made it, and nothing told a
user whose release the harness was never run against; Gemini CLI 0.61 refuses any command holding `$(`, a
backtick or `<(` without running it, and that refusal was recorded as a step that exited 0; inspect's react agent
(the bridge's default solvers) kept calling a model that kept calling tools after the run had ended (10 minutes
at half a core, until killed). The real programs are used only where installed (skipped otherwise); the rest are
fakes laid out as their installs are.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest
import test_agents_round1
from automedbench.errors import UserError
from automedbench.testing import register_toy_track
from automedbench_models.gatewaysteps import read_answer
from automedbench_models.installed import find_binary, native_program
from automedbench_models.programversion import MAX_MANIFEST_BYTES, installed_version, version_line
from automedbench_models.systems import SYSTEMS
from automedbench_models.wiremessages import WireAnswer

cli = test_agents_round1.cli

GEMINI_REFUSAL = ("Command injection detected: command substitution syntax ($(), backticks, <() or >()) found in "
                  "command arguments. This is a security risk and the command was blocked.")


# ------------------------------------------------------------------ which release is installed


def _npm_codex(prefix: Path, version: str, name: str = "@openai/codex") -> Path:
    """An npm prefix laid out as `npm install --prefix` leaves Codex: the `.bin` link to the Node launcher, and the
    native program in its platform package (what the harness runs)."""
    package = prefix / "node_modules" / "@openai" / "codex"
    (package / "bin").mkdir(parents=True)
    (package / "package.json").write_text(json.dumps({"name": name, "version": version}))
    (package / "bin" / "codex.js").write_text("#!/usr/bin/env node\n")
    (package / "bin" / "codex.js").chmod(0o755)
    native = prefix / "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
    native.parent.mkdir(parents=True)
    native.write_text("#!/bin/sh\n")
    native.chmod(0o755)
    (prefix / "node_modules" / ".bin").mkdir()
    (prefix / "node_modules" / ".bin" / "codex").symlink_to("../@openai/codex/bin/codex.js")
    return prefix / "node_modules" / ".bin" / "codex"


def _venv(folder: Path, dist: str, version: str, program: str, text: str = "#!/bin/sh\n") -> Path:
    """A virtualenv holding `<dist>-<version>.dist-info` and the program `bin/<program>`."""
    (folder / "bin").mkdir(parents=True)
    (folder / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (folder / f"lib/python3.11/site-packages/{dist}-{version}.dist-info").mkdir(parents=True)
    path = folder / "bin" / program
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_the_installed_release_is_read_from_each_install_layout(tmp_path):
    codex = _npm_codex(tmp_path / "npm", "0.171.0")
    assert installed_version(SYSTEMS["codex"], codex) == "0.171.0"
    native = native_program(codex) if os.uname().machine == "x86_64" else codex
    assert installed_version(SYSTEMS["codex"], native) == "0.171.0"  # the platform package's sibling
    mini = _venv(tmp_path / "mini", "mini_swe_agent", "2.4.6", "mini")
    assert installed_version(SYSTEMS["mini-swe-agent"], mini) == "2.4.6"
    # `uv tool install` links the program from its own virtualenv
    tool = _venv(tmp_path / "tools" / "openhands", "openhands", "1.16.0", "openhands")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "openhands").symlink_to(tool)
    assert installed_version(SYSTEMS["openhands"], tmp_path / "bin" / "openhands") == "1.16.0"
    # Claude Code's native installer: bin/claude -> versions/X.Y.Z
    release = tmp_path / "share" / "claude" / "versions" / "2.1.337"
    release.parent.mkdir(parents=True)
    release.write_text("")
    (tmp_path / "bin" / "claude").symlink_to(release)
    assert installed_version(SYSTEMS["claude-code"], tmp_path / "bin" / "claude") == "2.1.337"
    # what does not say: another package's manifest, one past the size bound, a bare script
    assert installed_version(SYSTEMS["codex"], _npm_codex(tmp_path / "other", "1.0.0", name="codex-fork")) == ""
    big = _npm_codex(tmp_path / "big", "0.171.0")
    manifest = tmp_path / "big/node_modules/@openai/codex/package.json"
    manifest.write_text(json.dumps({"name": "@openai/codex", "version": "0.171.0", "pad": "x" * MAX_MANIFEST_BYTES}))
    assert installed_version(SYSTEMS["codex"], big) == ""
    assert installed_version(SYSTEMS["gemini-cli"], Path("/bin/sh")) == ""
    assert installed_version(SYSTEMS["mini-swe-agent"], Path("/bin/sh")) == ""


def test_the_version_line_names_the_tested_releases_and_the_pinned_install():
    codex = SYSTEMS["codex"]
    assert version_line(codex, Path("/x/codex"), codex.tested[-1]) == ""
    line = version_line(codex, Path("/x/codex"), "0.999.0")
    assert "\n" not in line and line.startswith("codex: Codex CLI 0.999.0 is installed; this harness was tested with")
    assert f"@openai/codex@{codex.tested[-1]}`" in line
    assert "cannot tell which Codex CLI release /x/codex is" in version_line(codex, Path("/x/codex"), "")
    mini = SYSTEMS["mini-swe-agent"]
    assert mini.pinned_install().endswith(f"/bin/pip install mini-swe-agent=={mini.tested[-1]}")
    assert all(system.tested for system in SYSTEMS.values())  # the README's table names each


# a program that asks nothing, writes mini-swe-agent's (empty) trajectory and exits 0: the session is what is tested
STUB = r'''#!/usr/bin/env python3
import json, os
with open(os.path.join(os.environ["AMB_DIR"], "trajectory.json"), "w") as out:
    json.dump({"messages": []}, out)
'''


@pytest.mark.parametrize("version", ["9.9.9", SYSTEMS["mini-swe-agent"].tested[-1]])
def test_the_release_is_said_before_the_run_when_untested_and_recorded_either_way(cli, tmp_path, version):
    """Before: nothing in the run, its result or on the terminal named the program's release."""
    program = _venv(tmp_path / "mini", "mini_swe_agent", version, "mini", STUB)
    out = tmp_path / "runs"
    result = cli("run", "--task", "toy/vowels", "--agent", "mini-swe-agent", "--agent-option", "api_key_env=none",
                 "--agent-option", f"bin={program}", "--agent-option", "base_url=http://127.0.0.1:9",
                 "--time-limit", "90", "--out", out)
    folder = next(out.glob("*/result.json")).parent
    events = [json.loads(line) for line in (folder / "trajectory.jsonl").open()]
    gateway = next(e for e in events if e["type"] == "model_gateway")
    assert gateway["program"] == {"version": version, "tested": list(SYSTEMS["mini-swe-agent"].tested)}, gateway
    session = next(e for e in events if e["type"] == "assistant" and e["turn"] == 1)
    assert f"Running mini-swe-agent {version} inside the sandbox" in session["content"], session
    said = [line for line in result.stderr.splitlines() if "this harness was tested with" in line]
    notes = [e["note"] for e in events if e["type"] == "note" and "this harness was tested with" in e["note"]]
    record = json.loads((folder / "result.json").read_text())
    shown = " ".join(cli("show", str(folder)).output.split())
    if version == "9.9.9":
        assert len(said) == 1 and said[0].startswith("mini-swe-agent: mini-swe-agent 9.9.9 is installed;"), \
            result.stderr
        assert notes == said, notes
        assert record["runtime"]["agent_program"] == "mini-swe-agent 9.9.9 (untested release)", record["runtime"]
    else:
        assert said == [] and notes == [], (said, notes)
        assert record["runtime"]["agent_program"] == f"mini-swe-agent {version}", record["runtime"]
    assert f"agent program: {record['runtime']['agent_program']}" in shown, shown


def test_a_program_linked_from_a_folder_the_sandbox_does_not_show_is_started_through_its_target(cli, tmp_path):
    """`uv tool install` (the README's OpenHands install) links ~/.local/bin/NAME into the tool's virtualenv; the
    sandbox mounts the virtualenv, not the link's folder. Before: `NAME: No such file or directory`, exit 127, the
    run an agent_failure at once."""
    program = _venv(tmp_path / "tools" / "mini", "mini_swe_agent", "2.4.6", "mini", STUB)
    (tmp_path / "local-bin").mkdir()
    link = tmp_path / "local-bin" / "mini"
    link.symlink_to(program)
    out = tmp_path / "runs"
    cli("run", "--task", "toy/vowels", "--agent", "mini-swe-agent", "--agent-option", "api_key_env=none",
        "--agent-option", f"bin={link}", "--agent-option", "base_url=http://127.0.0.1:9", "--time-limit", "90",
        "--out", out)
    folder = next(out.glob("*/result.json")).parent
    events = [json.loads(line) for line in (folder / "trajectory.jsonl").open()]
    session = next(e for e in events if e["type"] == "tool" and e.get("session"))
    assert session["exit_code"] == 0, (session["exit_code"], session.get("stderr", "")[-300:])
    assert str(program) in session["code"] and str(link) not in session["code"]


# ------------------------------------------------------------------ Gemini CLI's refusals


def test_a_command_the_program_refused_to_run_has_no_exit_code():
    """Gemini CLI 0.61 answers a command holding `$(`, a backtick or `<(` with a refusal and runs nothing: it was
    recorded as a step that exited 0. Its answers to commands that ran keep their frame (and exit codes)."""
    answer = WireAnswer("id", "run_shell_command", GEMINI_REFUSAL, False)
    assert read_answer("gemini-cli", "run_shell_command", "echo $(date)", answer) == (None, GEMINI_REFUSAL)
    ran = WireAnswer("id", "run_shell_command", "<untrusted_context>\nOutput: 2026\nProcess Group PGID: 41\n"
                                                "</untrusted_context>", False)
    assert read_answer("gemini-cli", "run_shell_command", "date +%Y", ran) == (0, "2026")
    empty = WireAnswer("id", "run_shell_command", "<untrusted_context>\nOutput: (empty)\nExit Code: 1\n"
                                                  "Process Group PGID: 48\n</untrusted_context>", False)
    assert read_answer("gemini-cli", "run_shell_command", "false", empty)[0] == 1
    qwen = WireAnswer("id", "run_shell_command", "Command: echo $(date)\nDirectory: (root)\nOutput: x\nError: (none)\n"
                                                 "Exit Code: 0\nSignal: (none)\nProcess Group PGID: (none)", False)
    assert read_answer("qwen-code", "run_shell_command", "echo $(date)", qwen) == (0, "x")  # Qwen Code runs it


@pytest.mark.slow
def test_the_real_gemini_cli_refuses_command_substitution_and_the_step_says_so(cli, tmp_path):
    """The installed Gemini CLI (skipped when absent), through the command line: a command with `$(...)` never
    runs; the step's exit code is unknown (the terminal says so) and its output is the program's refusal; a plain
    command after it runs and exits 0."""
    sys.path.insert(0, str(Path(__file__).parent))
    from scripted_model_server import ScriptedModelServer, Step, steps_script

    try:
        binary = find_binary(SYSTEMS["gemini-cli"])
    except UserError as exc:
        pytest.skip(str(exc))
    script = steps_script([Step("Substitute.", "echo $(echo inner) > /workspace/sub.txt"), Step("Plain.", "echo ok")])
    out = tmp_path / "runs"
    with ScriptedModelServer(script) as server:
        result = cli("run", "--task", "toy/vowels", "--agent", "gemini-cli", "--agent-option", f"bin={binary}",
                     "--agent-option", f"base_url={server.url}", "--agent-option", "api_key_env=none",
                     "--agent-option", "model=scripted", "--out", out)
    folder = next(out.glob("*/result.json")).parent
    steps = [e for e in (json.loads(line) for line in (folder / "trajectory.jsonl").open())
             if e["type"] == "tool" and e.get("observed_by") == "gateway"]
    assert [s["exit_code"] for s in steps] == [None, 0], [(s["code"], s["exit_code"], s["stdout"]) for s in steps]
    assert "blocked" in steps[0]["stdout"] and "ok" in steps[1]["stdout"]
    lines = result.output.splitlines()
    at = next(n for n, line in enumerate(lines) if "execute_code  Substitute." in line)
    assert lines[at + 1].strip().startswith("exit code unknown"), lines[at:at + 3]


# ------------------------------------------------------------------ inspect's react agent after the run ended


@pytest.mark.slow  # inspect_ai imports in ~10 s
@pytest.mark.skipif(importlib.util.find_spec("inspect_ai") is None, reason="inspect_ai is not installed")
def test_the_default_inspect_agent_stops_once_the_run_has_ended(tmp_path):
    """A model that calls submit_results after every reply: accepted once, the run is scored and ended. Before, the
    bridge's react agent went on asking the model (every later call refused) for ever; now it stops."""
    from automedbench_inspect.tasks import automedbench_task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    register_toy_track()
    write = ("import pathlib\nfor case in pathlib.Path('/data/public').iterdir():\n"
             "    (pathlib.Path('/workspace/outputs') / case.name).mkdir(parents=True, exist_ok=True)\n"
             "    (pathlib.Path('/workspace/outputs') / case.name / 'answer.txt').write_text('1')\n")
    asked = [0]

    def next_output(*_):
        asked[0] += 1
        if asked[0] == 1:
            output = ModelOutput.for_tool_call("mockllm/model", "execute_code", {"language": "python", "code": write})
        elif asked[0] <= 40:
            output = ModelOutput.for_tool_call("mockllm/model", "submit_results", {})
        else:  # the bound of this test: before the fix it never stopped
            output = ModelOutput.from_content("mockllm/model", "giving up")
        output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return output

    task = automedbench_task("toy/vowels", out=str(tmp_path / "runs"), data_root=str(tmp_path / "data"))
    (log,) = inspect_eval(task, model=get_model("mockllm/model", custom_outputs=next_output),
                          log_dir=str(tmp_path / "logs"), display="none")
    (sample,) = log.samples
    score = sample.scores["automedbench_scorer"]
    assert score.metadata["end_reason"] == "submitted", score.metadata
    assert asked[0] == 2, asked  # the write, the accepted submit; nothing after the run ended
    # inspect's log handler (left on the root logger) refused a record at a level it has no name for with a pydantic
    # error out of the logging call: nibabel logs a bad header at 45, so a later submit gate in this process said
    # inspect's error, not the file's (test_redteam_round10 failed after this test in one worker)
    import logging

    assert any(type(h).__module__.startswith("inspect_ai") for h in logging.getLogger().handlers)
    logging.getLogger("nibabel.global").log(45, "a header problem at nibabel's own level")
