"""`automedbench new-track NAME`: its output installs beside the core, passes `validate-task`, runs its demo at A
and passes its own tests, with no edits; bad names and occupied folders are one line and exit 2."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest
from automedbench.cli import main
from click.testing import CliRunner

RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")


@pytest.mark.parametrize("name", ["My-Track", "1abc", "class", "x", "a/b", "trailing_"])
def test_a_bad_track_name_is_one_line(name, tmp_path):
    cli = CliRunner().invoke(main, ["new-track", name, "--dir", str(tmp_path)])
    assert cli.exit_code == 2 and len(cli.output.strip().splitlines()) == 1, cli.output
    assert not any(tmp_path.iterdir())


def test_an_installed_name_or_an_occupied_folder_is_refused(tmp_path):
    cli = CliRunner().invoke(main, ["new-track", "segmentation", "--dir", str(tmp_path)])
    assert cli.exit_code == 2 and "installed already" in cli.output
    (tmp_path / "automedbench-mine" / "keep.txt").parent.mkdir()
    (tmp_path / "automedbench-mine" / "keep.txt").write_text("mine")
    cli = CliRunner().invoke(main, ["new-track", "mine", "--dir", str(tmp_path)])
    assert cli.exit_code == 2 and "not empty" in cli.output
    assert (tmp_path / "automedbench-mine" / "keep.txt").read_text() == "mine"


@pytest.mark.slow  # a venv, an editable install, validate-task, a run and the package's own tests (~1 min)
def test_the_new_track_validates_runs_its_demo_at_a_and_passes_its_tests_with_no_edits(tmp_path):
    cli = CliRunner().invoke(main, ["new-track", "scaffolded", "--dir", str(tmp_path)])
    assert cli.exit_code == 0, cli.output
    package = tmp_path / "automedbench-scaffolded"
    assert "pip install -e" in cli.output and str(package) in cli.output
    for part in ("pyproject.toml", "README.md", "tests/test_scaffolded_demo.py", "automedbench_scaffolded/metric.py",
                 "automedbench_scaffolded/tasks/demo.yaml", "automedbench_scaffolded/templates/task.md.j2",
                 "automedbench_scaffolded/rubric.py", "automedbench_scaffolded/data/demo.py"):
        assert (package / part).is_file(), part
    if RUFF:  # the generated code keeps the project's style
        lint = subprocess.run([RUFF, "check", "--config", str(Path(__file__).parents[1] / "pyproject.toml"),
                               str(package)], capture_output=True, text=True)
        assert lint.returncode == 0, lint.stdout
    # a venv of its own that sees this one's packages (the core, the test kit), so only the new track is installed
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    Path(purelib, "_amb_parent.pth").write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                    "--no-build-isolation", "-e", str(package)], check=True, capture_output=True, timeout=600)
    env = {**os.environ, "AUTOMEDBENCH_DATA": str(tmp_path / "data")}
    check = subprocess.run([str(python), "-m", "automedbench.cli", "validate-task", "scaffolded/demo"],
                           capture_output=True, text=True, env=env, timeout=600)
    assert check.returncode == 0 and "valid: scaffolded/demo" in check.stdout, check.stdout + check.stderr
    assert "empty baseline rates F" in check.stdout
    # its constant answer is wrong everywhere: no case agrees with a reference (the core's default evidence): F
    assert "trivial baseline constant rates C or F — rating F: no case shows positive metric evidence" in check.stdout
    run = subprocess.run([str(python), "-m", "automedbench.cli", "run", "--task", "scaffolded/demo", "--agent",
                          "reference", "--out", str(tmp_path / "runs"), "--quiet"], capture_output=True, text=True,
                         env=env, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    (result,) = (tmp_path / "runs").glob("*/result.json")
    stored = json.loads(result.read_text())
    assert stored["aggregate"]["rating"] == "A" and stored["task"]["strict"] == 1.0
    assert all(s["score"] == 1.0 for s in stored["stages"]), [(s["stage"], s["score"]) for s in stored["stages"]]
    tests = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=package,
                           capture_output=True, text=True, env=env, timeout=900)
    assert tests.returncode == 0 and "3 passed" in tests.stdout, tests.stdout[-3000:] + tests.stderr[-2000:]


def test_validate_task_fails_a_constant_that_rates_above_c_even_when_the_track_calls_nothing_trivial(tmp_path):
    from automedbench.plugins import registry
    from automedbench_testkit.newtrack import write_track

    dest = write_track("leaky", tmp_path)
    baselines = dest / "automedbench_leaky" / "baselines.py"
    text = baselines.read_text().replace('answer = "9" if name == "constant" else', 'answer =')  # the truth
    baselines.write_text(text + '\nTRIVIAL = {"empty": "no outputs"}  # the constant left out on purpose\n')
    sys.path.insert(0, str(dest))
    import automedbench_leaky.plugin as plugin

    registry().add_plugin(plugin, name="leaky", distribution="automedbench-leaky")
    try:
        cli = CliRunner().invoke(main, ["validate-task", "leaky/demo", "--data-root", str(tmp_path / "data")])
    finally:  # later tests in this worker see the installed tracks only
        registry().remove_plugin("leaky")
        sys.path.remove(str(dest))
    assert cli.exit_code == 1, cli.output
    assert "FAIL trivial baseline constant rates C or F — rating A" in cli.output
    assert "ok   empty baseline rates F" in cli.output and "1 problem(s): leaky/demo" in cli.output
