"""Features own their commands through `automedbench_register_commands`: the campaign (sweep, codes,
leaderboard, view, rejudge, judge-agreement), the docker images command and the test kit's validate-task
come in like a third party's, and a clash is a clear problem."""

from __future__ import annotations

import os
import subprocess
import sys
import types

import click
import pytest
from automedbench.cli import main
from automedbench.errors import UserError
from automedbench.hookspecs import hookimpl
from automedbench.plugins import Registry
from click.testing import CliRunner

ENGINE = {"run", "evaluate", "show", "plugins", "tasks", "stage", "verify"}
# Each feature command and the plugin (entry point) that owns it: the campaign, docker and the test kit are
# their own distributions.
FEATURE_OWNERS = {"sweep": "campaign", "codes": "campaign", "leaderboard": "campaign", "view": "campaign",
                  "rejudge": "campaign", "judge-agreement": "campaign", "images": "docker",
                  "validate-task": "testkit", "new-track": "testkit"}
FEATURES = set(FEATURE_OWNERS)


def command_plugin(name: str, *commands: click.Command) -> types.ModuleType:
    module = types.ModuleType(name)

    @hookimpl
    def automedbench_register_commands(cli):
        for command in commands:
            cli.add_command(command)

    module.automedbench_register_commands = automedbench_register_commands
    return module


@pytest.fixture
def fresh(monkeypatch):
    """A registry of the installed plugins that the command line uses for this test only."""
    reg = Registry()
    reg.load_entry_points()
    monkeypatch.setattr("automedbench.cli.registry", lambda: reg)
    return reg


def test_the_engine_defines_only_engine_commands_and_help_lists_every_one(fresh):
    assert set(main.commands) == ENGINE
    owners = {name: comp.plugin for name, comp in fresh.commands(reserved=main.commands).items()}
    assert owners == FEATURE_OWNERS
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    listed = {line.split()[0] for line in result.output.split("Commands:")[1].splitlines() if line.strip()}
    assert listed == ENGINE | FEATURES


def test_a_command_gets_the_command_line_context_from_the_hook(fresh):
    """A plugin's command prints on the command line's consoles and reads its registry without importing the
    command line: the hook hands it a CommandContext, and the command gets the same one as its click obj."""
    from automedbench.engine import CommandContext

    given: list = []

    @click.command("ctx-amb")
    @click.pass_obj
    def ctx_command(context):
        context.console.print(f"tasks {len(context.registry().tasks())}")
        context.err_console.print("on stderr")
        given.append(context)

    module = types.ModuleType("amb_ctx_plugin")

    @hookimpl
    def automedbench_register_commands(cli, context):
        given.append(context)
        cli.add_command(ctx_command)

    module.automedbench_register_commands = automedbench_register_commands
    fresh.add_plugin(module, name="amb-ctx", distribution="amb-ctx-dist")
    result = CliRunner().invoke(main, ["ctx-amb"])
    assert result.exit_code == 0, result.output
    assert f"tasks {len(fresh.tasks())}" in result.stdout and "on stderr" in result.stderr
    hook_context, command_context = given
    assert isinstance(hook_context, CommandContext) and isinstance(command_context, CommandContext)
    assert hook_context.registry() is fresh and command_context.registry() is fresh
    assert command_context.console is hook_context.console


def test_importing_the_cli_imports_no_feature():
    code = ("import sys, automedbench.cli\n"
            "print(any(m.startswith('automedbench_') for m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=os.environ)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_a_third_party_command_registers_and_runs(fresh):
    @click.command("hello-amb")
    @click.option("--name", required=True, help="Who to greet.")
    def hello(name):
        """Greets (a third-party command)."""
        click.echo(f"hello {name}")

    fresh.add_plugin(command_plugin("amb_hello_plugin", hello), name="amb-hello", distribution="amb-hello-dist")
    result = CliRunner().invoke(main, ["hello-amb", "--name", "there"])
    assert result.exit_code == 0, result.output
    assert result.output == "hello there\n"
    assert "hello-amb" in CliRunner().invoke(main, ["--help"]).output
    listing = CliRunner().invoke(main, ["plugins"], terminal_width=200).output
    assert any("command" in line and "hello-amb" in line and "amb-hello-dist" in line for line in listing.splitlines())
    # the group's own error handling covers a plugin command too: a bad option is one line, exit 2
    bad = CliRunner().invoke(main, ["hello-amb"])
    assert bad.exit_code == 2 and "Missing option '--name'" in bad.stderr and "hello-amb --help" in bad.stderr


def test_a_clashing_command_is_a_clear_problem_and_the_first_owner_keeps_the_name(fresh):
    @click.command("run")
    def fake_run():
        """Would shadow the engine's run."""
        click.echo("fake run")

    @click.command("sweep")
    def fake_sweep():
        """Would shadow the campaign's sweep."""
        click.echo("fake sweep")

    fresh.add_plugin(command_plugin("amb_clash_plugin", fake_run, fake_sweep), name="amb-clash",
                     distribution="amb-clash-dist")
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    problems = [line for line in result.stderr.splitlines() if "plugin problem" in line]
    assert any("amb-clash" in p and "command 'run' clashes with the one from the engine" in p for p in problems)
    assert any("amb-clash" in p and "command 'sweep' clashes with the one from campaign" in p for p in problems)
    assert len(problems) == 2
    again = CliRunner().invoke(main, ["sweep", "--help"])  # said once, and the campaign's sweep is the one run
    assert again.exit_code == 0 and "plugin problem" not in again.stderr and "--agents" in again.output
    assert "fake" not in CliRunner().invoke(main, ["run", "--help"]).output


def test_a_failing_command_hook_is_reported_and_the_rest_still_load(fresh):
    module = types.ModuleType("amb_broken_commands")

    @hookimpl
    def automedbench_register_commands(cli):
        raise RuntimeError("boom")

    module.automedbench_register_commands = automedbench_register_commands
    fresh.add_plugin(module, name="amb-broken")
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0 and "sweep" in result.output
    assert "amb-broken" in result.stderr and "RuntimeError: boom" in result.stderr


@pytest.fixture
def core_alone(monkeypatch):
    """The command line over a registry of the core's own built-ins only: no built-in distribution installed."""
    import automedbench.builtins
    from automedbench.toy import plugin as toy

    reg = Registry()
    reg.add_plugin(automedbench.builtins, name="builtins")
    reg.add_plugin(toy, name="toy")
    monkeypatch.setattr("automedbench.cli.registry", lambda: reg)
    return reg


@pytest.mark.parametrize(("argv", "extra"), [
    (["sweep", "--agents", "reference", "--tasks", "segmentation/demo"], "campaign"),
    (["view", "some-run"], "campaign"),
    (["images", "build"], "docker"),
    (["rejudge", "some-run", "--judge", "rules"], "campaign"),
    (["judge-agreement", "some-run", "--judge-a", "rules", "--judge-b", "rules"], "campaign"),
    (["validate-task", "toy/vowels"], "test"),
])
def test_a_command_of_an_extra_not_installed_names_the_extra(core_alone, argv, extra):
    """Without its distribution, a feature command is one line naming the extra to install, exit 2."""
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"pip install 'automedbench[{extra}]'" in lines[0], result.stderr
    assert argv[0] not in CliRunner().invoke(main, ["--help"]).output.split("Commands:")[1]


@pytest.mark.parametrize(("kind", "name", "extra"), [
    ("sandbox", "docker", "docker"), ("evaluator", "docker", "docker"), ("evaluator", "warm", "campaign"),
    ("agent", "openai", "openai"), ("judge", "anthropic", "anthropic"), ("model", "openai", "openai"),
    ("agent", "replay", "models"), ("judge", "llm", "models"),
])
def test_a_component_of_an_extra_not_installed_names_the_extra(core_alone, kind, name, extra):
    with pytest.raises(UserError, match=rf"pip install 'automedbench\[{extra}\]'"):
        core_alone.get(kind, name)
    with pytest.raises(UserError, match="unknown sandbox 'nosuch'"):  # any other name: unknown, as before
        core_alone.get("sandbox", "nosuch")


def test_run_with_a_sandbox_of_an_extra_not_installed_is_one_line(core_alone, tmp_path):
    result = CliRunner().invoke(main, ["run", "--task", "toy/vowels", "--agent", "reference", "--sandbox",
                                       "docker", "--out", str(tmp_path / "runs"), "--quiet"])
    assert result.exit_code == 2, result.output
    assert "pip install 'automedbench[docker]'" in result.stderr and "Traceback" not in result.output


def test_run_with_a_model_agent_not_installed_is_one_line(core_alone, tmp_path):
    result = CliRunner().invoke(main, ["run", "--task", "toy/vowels", "--agent", "openai", "--agent-option",
                                       "model=gpt-4o", "--out", str(tmp_path / "runs"), "--quiet"])
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and "pip install 'automedbench[openai]'" in result.stderr


def test_run_with_the_warm_evaluator_not_installed_fails_before_the_run(core_alone, tmp_path):
    result = CliRunner().invoke(main, ["run", "--task", "toy/vowels", "--agent", "reference", "--warm-evaluator",
                                       "--out", str(tmp_path / "runs"), "--quiet"])
    assert result.exit_code == 2, result.output
    assert "pip install 'automedbench[campaign]'" in result.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
