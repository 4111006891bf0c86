"""The agent systems people run, round 5: a Qwen Code toy run whose every command saw no /workspace.

One of four identical runs (agents4, Qwen Code 0.24.4 against the scripted loopback model) scored F: each command
the program ran found neither /workspace nor /data/public, on a read-only root. Nothing crossed runs: the run's
own record says `sandbox local-plain` and its brief named the host's paths, because bubblewrap's start-up probe
had failed once and the run fell back to the unisolated sandbox (whose calls keep the host's root, read-only but
the workspace; the scripted model used the container paths). The probe bound the host's whole root, and other
runs' workspaces are mounts below it: one unmounted and removed while bubblewrap remounted its copy read-only
fails the probe ("Unable to apply mount flags: remount ...: No such file or directory", reproduced here under a
mount churn, ~1 in 400). The probe now mounts what a call mounts, asks again before it believes a failure, and the
fallback's warning says what bubblewrap answered. Also: a program's session was printed as "turn 1" before the
program's own first step, also "turn 1". Fake programs throughout; real bubblewrap only where installed.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
import test_agents_round4
import test_cli_newuser
from automedbench.sandboxes import local

cli = test_cli_newuser.cli  # the new user's command line (CliRunner, errors as a pipe sees them), shared
RACE = ('bwrap: Can\'t bind mount /oldroot/ on /newroot/: Unable to apply mount flags: remount '
        '"/newroot/var/tmp/other-run/workspace": No such file or directory')


def fake_bwrap(folder: Path, fail_first: int, always: bool = False) -> Path:
    """A `bwrap` that logs each call's arguments, fails as the mount race does when told to bind the host's whole
    root (`--ro-bind / /`), on its first `fail_first` calls, or always; else exits 0."""
    folder.mkdir(parents=True, exist_ok=True)
    log, message, program = folder / "calls.log", folder / "race.txt", folder / "bwrap"
    message.write_text(RACE + "\n")
    again = "race" if always else f'[ "$(wc -l < {log})" -gt {fail_first} ] || race'
    program.write_text(f"""#!/bin/sh
echo "$*" >> {log}
race() {{ cat {message} >&2; exit 1; }}
case " $* " in *" --ro-bind / / "*) race;; esac
{again}
exit 0
""")
    program.chmod(0o755)
    return program


@pytest.fixture
def probe_afresh():
    """The probe's answer is kept per process: each test asks anew, and leaves no fake answer behind."""
    local._bwrap_probe.cache_clear()
    yield
    local._bwrap_probe.cache_clear()


def test_a_probe_failing_once_as_a_mount_race_does_not_drop_the_run_to_the_plain_sandbox(tmp_path, monkeypatch,
                                                                                        probe_afresh):
    program = fake_bwrap(tmp_path / "bin", fail_first=1)
    monkeypatch.setenv("PATH", f"{program.parent}:{os.environ['PATH']}")
    monkeypatch.setattr(local, "BWRAP_PROBE_PAUSE_S", 0.0)
    assert local.bwrap_path() == str(program)
    assert local.bwrap_unusable() == ""
    calls = (program.parent / "calls.log").read_text().splitlines()
    assert len(calls) == 2, calls  # the race, then the answer; never asked again in this process
    assert all(" / / " not in f" {c} " for c in calls), calls  # never the host's whole root
    assert all("--proc /proc" in c and "--dev /dev" in c and "--ro-bind-try /usr /usr" in c for c in calls), calls


def test_a_bwrap_that_keeps_failing_is_named_in_the_fallbacks_warning(cli, tmp_path, monkeypatch, probe_afresh):
    """Three failures in a row are believed: the run falls back (as before) and its warning says why."""
    if local.plain_namespace_unsupported(str(local.state_dir())):
        pytest.skip("no namespace for a plain call here (the fallback is refused)")
    program = fake_bwrap(tmp_path / "bin", fail_first=0, always=True)
    monkeypatch.setenv("PATH", f"{program.parent}:{os.environ['PATH']}")
    monkeypatch.setattr(local, "BWRAP_PROBE_PAUSE_S", 0.0)
    assert local.bwrap_path() is None and local.bwrap_unusable() == RACE
    assert len((program.parent / "calls.log").read_text().splitlines()) == local.BWRAP_PROBE_FAILURES
    ran = cli("run", "--task", "toy/vowels", "--agent", "reference", "--out", tmp_path / "runs")
    assert ran.exit_code == 0, ran.output
    said = " ".join(ran.output.split())
    assert f"WARNING: bubblewrap is not usable here ({RACE}): the agent runs as a plain host process" in said, said
    assert "sandbox local-plain" in said
    (record,) = (tmp_path / "runs").glob("*/result.json")
    isolation = json.loads(record.read_text())["isolation"]
    assert f"bubblewrap not used: {RACE}" in isolation["gaps"] and not isolation["verified"], isolation


@pytest.mark.skipif(shutil.which("bwrap") is None or os.geteuid() != 0, reason="real bubblewrap, mounts made as root")
def test_the_real_probe_passes_while_other_runs_mount_and_remove_their_workspaces(tmp_path, probe_afresh):
    """The incident's conditions: workspaces mounted, unmounted and removed beside the probe, as concurrent runs do."""
    found = shutil.which("bwrap")
    assert found is not None
    probe = subprocess.run(local.probe_command(found), capture_output=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip(f"bubblewrap does not start here: {probe.stderr.decode(errors='replace')[-200:]}")
    stop = threading.Event()
    where = tmp_path / "workspace"

    def churn() -> None:
        while not stop.is_set():
            where.mkdir(exist_ok=True)
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "none", str(where)], capture_output=True)
            subprocess.run(["umount", str(where)], capture_output=True)
            os.rmdir(where)

    worker = threading.Thread(target=churn, daemon=True)
    worker.start()
    try:
        failed = [p.stderr for p in (subprocess.run(local.probe_command(found), capture_output=True, timeout=60)
                                     for _ in range(60)) if p.returncode != 0]
    finally:
        stop.set()
        worker.join(timeout=30)
        if os.path.ismount(where):
            subprocess.run(["umount", str(where)], capture_output=True)
    assert failed == []
    assert local.bwrap_path() == found


def test_a_programs_session_is_not_printed_as_the_turn_its_first_step_is(cli, tmp_path):
    """The session line said "turn   1", and so did the program's first step right after it."""
    program = test_agents_round4._venv(tmp_path / "mini", "mini_swe_agent", "2.4.6", "mini", test_agents_round4.STUB)
    result = cli("run", "--task", "toy/vowels", "--agent", "mini-swe-agent", "--agent-option", "api_key_env=none",
                 "--agent-option", f"bin={program}", "--agent-option", "base_url=http://127.0.0.1:9",
                 "--time-limit", "90", "--out", tmp_path / "runs")
    lines = result.output.splitlines()
    (session,) = [line for line in lines if "inside the sandbox" in line]
    assert session.startswith("session  execute_code  Running mini-swe-agent 2.4.6"), lines
    assert not any(line.startswith("turn   1 execute_code") for line in lines), lines


@pytest.mark.slow  # an inspect eval of the toy task (inspect's own import and start-up: ~10 CPU-s)
def test_inspects_results_table_names_each_score_in_an_80_column_terminal(tmp_path):
    """Each score key had a metric of its own, shown by its package-qualified name: "automedben…  1.000" eight
    times, nothing saying which number was which but the key above it."""
    from automedbench.testing import register_toy_track
    from automedbench_inspect.tasks import KEYS, automedbench_task
    from inspect_ai import eval as inspect_eval
    from inspect_ai._display.core.results import task_scores
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from rich.console import Console

    register_toy_track()
    write = ("import pathlib\nfor case in pathlib.Path('/data/public').iterdir():\n"
             "    (pathlib.Path('/workspace/outputs') / case.name).mkdir(parents=True, exist_ok=True)\n"
             "    (pathlib.Path('/workspace/outputs') / case.name / 'answer.txt').write_text('1')\n")
    replies = [ModelOutput.for_tool_call("mockllm/model", "execute_code", {"language": "python", "code": write}),
               ModelOutput.for_tool_call("mockllm/model", "submit_results", {})]
    for reply in replies:  # counted here, or inspect counts the tokens with an encoding it would download
        reply.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    replies = iter(replies)
    task = automedbench_task("toy/vowels", out=str(tmp_path / "runs"), data_root=str(tmp_path / "data"))
    (log,) = inspect_eval(task, model=get_model("mockllm/model", custom_outputs=lambda *_: next(replies)),
                          log_dir=str(tmp_path / "logs"), display="none")
    (scores,) = log.results.scores
    score = log.samples[0].scores["automedbench_scorer"]
    assert list(scores.metrics) == list(KEYS)
    for key in KEYS:  # each the sample's own value (one sample), a stage not scored left as NaN
        value, mean = score.value[key], scores.metrics[key].value
        assert math.isnan(mean) if value is None else mean == value, (key, value, mean)
    console = Console(width=80, record=True, color_system=None)
    for table in task_scores(log.results.scores):
        console.print(table)
    shown = console.export_text()
    assert "…" not in shown, shown
    for key in KEYS:
        assert f"{key} " in shown and f"{scores.metrics[key].value:.3f}" in shown, shown
