"""Progress where people wait: a sweep off a terminal prints one line per finished run as it finishes (not at
the end), on a terminal it shows the runs in flight; a long `stage` reports files and bytes written on stderr."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from automedbench import progress
from automedbench.api import atomic_write_text, staging_area
from automedbench.cli import main
from automedbench.plugins import registry
from automedbench.progress import StagingProgress, SweepProgress
from automedbench.testing import register_toy_track
from click.testing import CliRunner
from rich.console import Console, Group


@pytest.mark.slow  # two whole toy runs, one after the other (~15 s)
def test_a_piped_sweep_prints_each_finished_run_while_the_next_one_runs(tmp_path):
    pytest.importorskip("automedbench_campaign")
    cli = Path(sys.executable).parent / "automedbench"
    proc = subprocess.Popen([str(cli), "sweep", "--agents", "reference", "--tasks", "toy/vowels", "--repeats", "2",
                             "--executor", "inline", "--no-require-isolation", "--out", str(tmp_path / "runs"),
                             "--data-root", str(tmp_path / "data")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "COLUMNS": "200"})
    try:
        first = proc.stderr.readline()
        while first and not first.startswith("[1/2]"):
            first = proc.stderr.readline()
        still_running = proc.poll() is None  # the second run has not finished: the line came as the first did
        proc.communicate(timeout=600)
    finally:
        proc.kill()
    assert still_running, "the first run's line arrived only when the sweep ended"
    assert first.startswith("[1/2] reference.toy-vowels.lite.r000-") and "  scored  Overall 1.000  A  " in first
    assert proc.returncode == 0


def test_on_a_terminal_the_runs_in_flight_are_shown_under_the_bar():
    bar = SweepProgress(console=Console(file=io.StringIO(), force_terminal=True, width=120))
    bar.add_task("sweep", total=3)
    now = time.monotonic()
    bar.in_flight.update({"a.toy-vowels.lite.r000-1": now - 12, "b.toy-vowels.lite.r000-2": now - 3})
    shown = Console(file=io.StringIO(), width=120, record=True)
    shown.print(Group(*bar.get_renderables()))
    text = shown.export_text()
    assert "running a.toy-vowels.lite.r000-1  12s" in text and "running b.toy-vowels.lite.r000-2  3s" in text
    bar.in_flight.update({f"run-{i}": now for i in range(20)})
    shown = Console(file=io.StringIO(), width=120, record=True)
    shown.print(Group(*bar.get_renderables()))
    assert "and 14 more running" in shown.export_text()


def test_a_long_stage_reports_files_and_bytes_on_stderr_and_a_quick_one_stays_quiet(tmp_path, monkeypatch):
    register_toy_track()
    quick = CliRunner().invoke(main, ["stage", "toy/vowels", "--data-root", str(tmp_path / "quick")])
    assert quick.exit_code == 0 and "staging toy/vowels:" not in quick.output

    def slow_stager(task, dest):
        with staging_area(dest) as area:
            for i in range(6):
                atomic_write_text(area.public / f"case_{i}" / "input.txt", "x" * 1000, shared=True)
                atomic_write_text(area.private / f"case_{i}" / "answer.txt", "1")
                time.sleep(0.15)
            return area.commit([f"case_{i}" for i in range(6)])

    monkeypatch.setattr(registry().track("toy"), "stage_demo", slow_stager)
    monkeypatch.setattr(progress, "FIRST_AFTER_S", 0.1)
    monkeypatch.setenv("AUTOMEDBENCH_PROGRESS_S", "0.1")
    cli = CliRunner().invoke(main, ["stage", "toy/vowels", "--force", "--data-root", str(tmp_path / "slow")])
    assert cli.exit_code == 0, cli.output
    lines = [line for line in cli.stderr.splitlines() if line.startswith("staging toy/vowels:")
             and "nothing written yet" not in line]
    assert len(lines) >= 3, cli.stderr
    assert "file(s)" in lines[-1] and " written, " in lines[-1] and "of 6 case folder(s)" in lines[-1]
    counts = [int(line.split(": ", 1)[1].split(" ")[0]) for line in lines]
    # it moved as the stager wrote; a listing taken while a file is renamed into place may miss that one entry
    assert counts[-1] > counts[0] and all(c >= max(counts[:i + 1]) - 1 for i, c in enumerate(counts)), counts
    assert "staged 6 case(s)" in cli.stdout and "staging toy/vowels" not in cli.stdout  # progress stays on stderr


def test_the_staging_progress_counts_what_is_written(tmp_path):
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    watch = StagingProgress("t/x", incoming, 4, Console(file=io.StringIO()))
    assert watch.describe().startswith("staging t/x: reading the download, nothing written yet (")
    (incoming / "public" / "c1").mkdir(parents=True)
    (incoming / "public" / "c1" / "a").write_bytes(b"x" * 2048)
    (incoming / "private").mkdir()
    (incoming / "private" / "b").write_bytes(b"y" * 10)
    assert watch.describe() == "staging t/x: 2 file(s), 2.0 KB written, 1 of 4 case folder(s)"
    for part in ("public", "private"):  # swapped in: the scratch copy is empty again, nothing more to say
        (incoming / part).rename(tmp_path / part)
    assert watch.describe() is None
