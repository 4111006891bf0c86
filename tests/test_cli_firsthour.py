"""Issue 12, first hour of a new user: task listing, --agent, evaluate timings and counts, docker without engine."""

from __future__ import annotations

import pytest
from automedbench.cli import main, tasks_table
from automedbench.errors import did_you_mean
from automedbench.plugins import registry
from automedbench.report import fmt_component
from click.testing import CliRunner
from rich.console import Console


@pytest.fixture()
def cli(data_root, staged, monkeypatch):
    monkeypatch.setenv("AUTOMEDBENCH_DATA", str(data_root))
    runner = CliRunner()
    return lambda *args: runner.invoke(main, [str(a) for a in args], prog_name="automedbench",
                                        catch_exceptions=False)


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
