"""What a new user following the README sees: one-line errors, readable tables, nothing eaten by rich."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
import yaml
from automedbench.cli import main, tasks_table
from automedbench.errors import did_you_mean
from automedbench.fsutil import current_umask
from automedbench.plugins import registry
from automedbench.report import fmt_component, render
from automedbench.scoring import truncate
from automedbench.serialize import read_json
from click.testing import CliRunner
from rich.console import Console


@pytest.fixture()
def cli(data_root, staged, monkeypatch):
    monkeypatch.setenv("AUTOMEDBENCH_DATA", str(data_root))
    runner = CliRunner()
    return lambda *args: runner.invoke(main, [str(a) for a in args], prog_name="automedbench",
                                        catch_exceptions=False)


def _copy_run(run_dir: Path, dest: Path) -> Path:
    """A copy under its own folder name (a result is signed for its run folder's name: a renamed copy is refused)."""
    dest = dest / run_dir.name
    shutil.copytree(run_dir, dest, ignore=shutil.ignore_patterns("workspace"))
    return dest


def _tear(run_dir: Path) -> int:
    """Cut trajectory.jsonl in the middle of a line, as a crash during a write would; return that line."""
    path = run_dir / "trajectory.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    keep = len(lines) // 2
    path.write_text("".join(lines[:keep]) + lines[keep][: len(lines[keep]) // 2])
    return keep + 1


@pytest.mark.parametrize("args,needle", [
    (["run", "--task", "segmentation/dmeo", "--agent", "reference"], "did you mean 'segmentation/demo'"),
    (["run", "--task", "segmentation/demo", "--agent", "reference", "--tier", "pr"],
     "(see 'automedbench run --help')"),
    (["run"], "Missing option '--task'"),
    (["rnu"], "No such command 'rnu'"),
    (["sweep", "--agents", "referense", "--tasks", "segmentation/demo"], "unknown agent 'referense'"),
])
def test_errors_are_one_line_even_when_piped(cli, args, needle, tmp_path):
    result = cli(*args, *(["--out", tmp_path / "sw"] if args[0] == "sweep" else []))
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], result.stderr
    assert result.stdout == ""


def test_unstaged_task_names_no_run_folder(cli, tmp_path):
    # noop: the reference agent refuses a real task first (its scripted solution covers the demos only)
    result = cli("run", "--task", "segmentation/kidney", "--agent", "noop", "--out", tmp_path / "runs")
    assert result.exit_code == 2 and "is not staged" in result.stderr
    assert result.stdout == "" and not any((tmp_path / "runs").glob("*"))


def test_run_header_names_the_folder_it_writes(cli, tmp_path):
    result = cli("run", "--task", "segmentation/demo", "--agent", "noop", "--out", tmp_path / "runs")
    assert result.exit_code == 0
    (folder,) = (tmp_path / "runs").iterdir()
    # first what the run will take (tests/test_ux_round23.py), then the folder it writes
    assert result.stdout.splitlines()[0].startswith("segmentation/demo (lite), agent noop: budget ")
    assert result.stdout.splitlines()[1].endswith(f"-> {folder}")
    # the slow phases after the agent say what is happening
    assert "scoring 5 case(s) in the isolated evaluator" in result.stdout
    assert "scoring S1–S3 with the rules judge" in result.stdout


@pytest.mark.slow  # a whole demo run through the CLI
def test_task_line_keeps_bracketed_text_and_integer_counts(run_agent):
    result, _ = run_agent("reference")
    console = Console(record=True, width=200)
    render(result, console)
    text = console.export_text()
    assert f"[used: {result.task.used}]" in text  # rich would take it for a markup tag
    count = int(result.task.components["lesion_positive_cases"])
    assert f"lesion_positive_cases {count}" in text and f"lesion_positive_cases {count}.000" not in text
    assert f"organ_dice {truncate(result.task.components['organ_dice'])}" in text  # cut, never rounded up


def test_summary_without_stages_prints_no_empty_table(run_agent):
    result, _ = run_agent("reference")
    console = Console(record=True, width=100)
    render(attrs.evolve(result, stages=[]), console)
    assert "Stage" not in console.export_text()


@pytest.mark.slow  # several runs through the CLI
def test_leaderboard_keeps_names_whole_and_reports_readable(cli, run_agent, tmp_path):
    for agent in ("reference", "skip-validate"):
        _copy_run(run_agent(agent)[1], tmp_path / "runs" / agent)
    csv = tmp_path / "board.csv"
    result = cli("leaderboard", tmp_path / "runs", "--csv", csv)
    assert result.exit_code == 0
    rows = [line for line in result.stdout.splitlines() if line.startswith("│ skip-validate ")]
    assert len(rows) == 2 and all("segmentation/demo" in r for r in rows)  # scores table and effort table
    for header in ("Overall", "Agentic", "S1", "S5", "A/B/C/F", "Cost $"):
        assert f" {header} " in result.stdout
    assert "…" not in result.stdout
    assert csv.stat().st_mode & 0o777 == 0o666 & ~current_umask()


def test_rejudge_refuses_a_torn_trajectory_and_rewrites_nothing(cli, run_agent, tmp_path):
    good = _copy_run(run_agent("reference")[1], tmp_path / "good")
    torn = _copy_run(run_agent("reference")[1], tmp_path / "torn")
    line = _tear(torn)
    before = {p: p.read_bytes() for p in (good / "result.json", torn / "result.json")}
    result = cli("rejudge", good, torn, "--judge", "rules")
    assert result.exit_code == 2 and f"line {line} is not valid JSON" in result.stderr
    assert {p: p.read_bytes() for p in before} == before  # checked before any run was re-graded
    assert not list(good.glob("judge.*.json"))

    agreement = cli("judge-agreement", good, torn, "--judge-a", "rules", "--judge-b", "rules", "--regrade")
    assert agreement.exit_code == 0 and "over 1 run(s)" in agreement.stdout
    # torn after the harness signed it: not the run it wrote, left out (a genuine torn run is skipped, as graded)
    assert f"left out {torn}" in agreement.stderr and "trajectory.jsonl changed" in agreement.stderr


def test_replay_of_a_torn_trajectory_needs_allow_torn(reg, run_agent, tmp_path):
    from automedbench.errors import UserError

    torn = _copy_run(run_agent("reference")[1], tmp_path / "torn")
    _tear(torn)
    with pytest.raises(UserError, match="allow_torn=true"):
        reg.create("agent", "replay", trajectory=str(torn))
    agent = reg.create("agent", "replay", trajectory=str(torn), allow_torn="true")
    assert 0 < len(agent.turns) < read_json(torn / "result.json", dict)["runtime"]["turns"]


def test_python_dash_m_cli_knows_every_command():
    done = subprocess.run([sys.executable, "-m", "automedbench.cli", "images", "--help"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and "build" in done.stdout


def test_listing_plugins_and_tasks_loads_no_numpy():
    code = ("import sys\nfrom automedbench.cli import main\n"
            "for cmd in ('plugins', 'tasks'):\n"
            "    try:\n        main([cmd], standalone_mode=False)\n    except SystemExit:\n        pass\n"
            "print('numpy' in sys.modules, 'nibabel' in sys.modules, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "False False"


def test_fast_yaml_loader_reads_task_files_like_the_safe_loader(reg):
    files = [p for track in reg.tracks() for p in sorted((Path(track.root) / "tasks").glob("*.yaml"))]
    assert files
    from automedbench.yamlfile import LOADER as _LOADER

    for path in files:
        text = path.read_text()
        assert yaml.load(text, Loader=_LOADER) == yaml.safe_load(text), path


def test_show_of_a_folder_of_runs_names_one(cli, run_agent, tmp_path):
    run = _copy_run(run_agent("reference")[1], tmp_path / "runs")
    result = cli("show", tmp_path / "runs")
    assert result.exit_code == 2
    assert f"not a run folder (no result.json); it holds 1 run(s), e.g. {run}" in result.stderr
    assert cli("show", run).exit_code == 0


def test_validate_task_rounds_baseline_scores(cli):
    import re

    result = cli("validate-task", "segmentation/demo")
    assert result.exit_code == 0
    lines = [line for line in result.stdout.splitlines() if "baseline" in line and "strict" in line]
    assert len(lines) == 3
    assert all(re.search(r"strict \d\.\d{3}(,|$)", line) for line in lines), lines


@pytest.mark.slow  # a whole demo run through the CLI
def test_agent_text_in_progress_lines_is_not_markup(cli, run_agent, tmp_path):
    """An agent (an LLM, or a replay note) may write `[/]` or `[replay: …]`: shown as is, never a crash."""
    import json

    src = _copy_run(run_agent("reference")[1], tmp_path / "src")
    path = src / "trajectory.jsonl"
    events = [json.loads(line) for line in path.read_text().splitlines()]
    first = next(e for e in events if e.get("type") == "assistant")
    first["content"] = "[/] closing nothing, [bold]not bold"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    result = cli("run", "--task", "segmentation/demo", "--agent", "replay", "--agent-option", f"trajectory={path}",
                 "--out", tmp_path / "runs")
    assert result.exit_code == 0, result.output
    assert "[/] closing nothing, [bold]not bold" in result.stdout
    assert "state scored" in result.stdout


# ---------------------------------------------------------------- issue 12, first hour: items 2, 3, 4, 7


def listing(width: int) -> str:
    specs = [spec for _, spec in registry().tasks().values()]
    console = Console(record=True, width=width, no_color=True)
    console.print(tasks_table(specs, width))
    return console.export_text()


@pytest.mark.parametrize("width", [200, 80, 60, 40])
def test_task_ids_are_never_cut_or_wrapped(width):
    text = listing(width)
    ids = [spec.id for _, spec in registry().tasks().values()]
    lines = text.splitlines()
    for task_id in ids:  # each id whole, on one line, in the first column
        assert any(line.startswith(f"│ {task_id} ") for line in lines), (task_id, text)
    assert "…" not in "".join(line.split("│")[1] for line in lines if line.startswith("│"))
    longest = max(len(i) for i in ids)
    assert max(len(line) for line in lines) <= max(width, longest + 4)


def test_narrow_terminals_drop_the_other_columns_first():
    headers = {w: listing(w).splitlines()[1] for w in (200, 80, 50)}
    assert all(c in headers[200] for c in ("Task", "Title", "Tiers", "Cases", "Metric", "Data"))
    assert "Title" in headers[80] and "Cases" in headers[80] and "Data" not in headers[80]
    assert "Task" in headers[50] and "Title" not in headers[50] and "Metric" not in headers[50]


def test_a_bare_task_name_suggests_its_track(cli):
    assert did_you_mean("kidney", ["segmentation/kidney", "vqa/demo"]).startswith(
        " (did you mean 'segmentation/kidney'?)")
    assert did_you_mean("kidny", ["segmentation/kidney"]).startswith(" (did you mean 'segmentation/kidney'?)")
    assert did_you_mean("zzz", ["segmentation/kidney"]) == "; known: segmentation/kidney"
    result = cli("run", "--task", "kidney", "--agent", "reference")
    assert result.exit_code == 2 and "did you mean 'segmentation/kidney'" in result.stderr


def test_agent_is_required_and_its_help_is_named(cli):
    result = cli("run", "--task", "segmentation/demo")
    assert result.exit_code == 2 and "Missing option '--agent'" in result.stderr
    result = cli("run", "--task", "segmentation/demo", "--agent")
    assert result.exit_code == 2 and "'--agent' requires an argument" in result.stderr
    assert "(see 'automedbench run --help')" in result.stderr
    result = cli("run", "--help")
    assert "[required]" in result.stdout.split("--agent")[1].split("--agent-option")[0]


def test_evaluate_reports_real_times_and_integer_counts(cli):
    result = cli("evaluate", "--task", "segmentation/demo", "--baseline", "empty")
    assert result.exit_code == 0
    line = next(x for x in result.stdout.splitlines() if x.startswith("state "))
    wall = float(line.split("wall ")[1].split("s")[0])
    harness = float(line.split("harness ")[1].split("s")[0])
    assert wall > 0.0 and harness == wall, line
    assert "lesion_positive_cases 4" in result.stdout
    assert fmt_component(0.0, "judge_fallback_count") == "0" and fmt_component(1.0, "yes_no_count") == "1"
    assert fmt_component(1.0, "dice") == "1.000" and fmt_component(0.0, "dice") == "0.000"
    assert fmt_component(12.0, "anything") == "12" and fmt_component(None, "x_count") == "null"


def test_docker_without_engine_names_no_run_folder(cli, tmp_path, monkeypatch):
    pytest.importorskip("docker", reason="the docker package is not installed")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    result = cli("run", "--task", "segmentation/demo", "--agent", "noop", "--sandbox", "docker",
                 "--out", tmp_path / "runs")
    assert result.exit_code == 2 and "no docker engine reachable" in result.stderr
    assert "->" not in result.stdout and str(tmp_path / "runs") not in result.stdout
    assert not any((tmp_path / "runs").glob("*"))


def test_run_names_its_page_or_in_one_line_what_the_core_alone_left_out(tmp_path, monkeypatch):
    """After a run: the page's path when the campaign wrote it, else one line naming what is missing and the
    extra (kept whole: "[campaign]" is not rich markup)."""
    import io
    from types import SimpleNamespace

    from automedbench import cli as cli_module
    from automedbench.records import FiredCode

    out = io.StringIO()
    monkeypatch.setattr(cli_module, "console", Console(file=out, width=300))
    untagged = SimpleNamespace(error_codes=[FiredCode("H-UNTAGGED", "no tagging step")])
    cli_module.say_left_out(tmp_path, untagged)
    (line,) = out.getvalue().strip().splitlines()
    assert line == ("left out by the core alone: the run page (view.html) and error codes E1–E5; "
                    "pip install 'automedbench[campaign]' adds them")
    (tmp_path / "view.html").write_text("<!DOCTYPE html>")
    out.truncate(0)
    out.seek(0)
    cli_module.say_left_out(tmp_path, SimpleNamespace(error_codes=[]))
    assert out.getvalue().startswith(f"page: {tmp_path / 'view.html'} ")
