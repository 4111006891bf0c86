"""A demanding user's walk, round 24: what the terminal does to a run, and two things the pages said wrong.
`automedbench run ... | head -3` ended the run where head stopped reading (rich's answer to a closed pipe is
SystemExit, which skipped the run's clean-up: its workspace stayed loop-mounted, its folder half-made); a closed
terminal made every later line an error the run recorded as a retryable infrastructure failure, and under `nohup`
the hang-up still cancelled it. VQA printed its counts "skipped" and "placeholders" as scores ("0.000"), and
segmentation's per-case table showed a lesion Dice of 1.000 for a case with no lesion, which the Task leaves out."""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import test_cli_newuser
from automedbench.api import CASE_LEFT_OUT
from automedbench.report import fmt_component
from automedbench.runfolder import RunFolder

cli = test_cli_newuser.cli  # the new user's command line (CliRunner, errors as a pipe sees them), shared
CLI = [sys.executable, "-c", "from automedbench.cli import main; main()"]
# as `nohup` leaves it: SIGHUP ignored (nohup itself would also send a terminal's output to nohup.out)
NOHUP_CLI = [sys.executable, "-c", "import signal; signal.signal(signal.SIGHUP, signal.SIG_IGN); "
                                   "from automedbench.cli import main; main()"]
RUN = ["run", "--task", "toy/vowels", "--agent", "reference"]


def _env(data_root: Path, tmp_path: Path) -> dict[str, str]:
    scratch = tmp_path / "tmp"  # a sandbox's call folders, removed with the test's
    scratch.mkdir(exist_ok=True)
    return {**os.environ, "AUTOMEDBENCH_DATA": str(data_root), "TMPDIR": str(scratch)}


def _mounted_below(root: Path) -> list[str]:
    """The mount points below `root`, unmounted once found: a failing test leaves no loop device behind."""
    with open("/proc/self/mounts") as mounts:
        points = [line.split()[1].replace("\\040", " ") for line in mounts]
    found = [p for p in points if p.startswith(str(root))]
    for point in reversed(found):
        subprocess.run(["umount", "-l", point], check=False)
    return found


def _only_run(out: Path) -> tuple[Path, dict]:
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    return run_dir, json.loads((run_dir / "result.json").read_text())


def test_a_run_piped_into_a_reader_that_stops_early_goes_on_to_its_record(data_root, tmp_path):
    """`run ... | head -2`: the run stopped at its next line (exit 1, nothing said), its workspace still mounted
    and no result.json. Now it goes on to its record, releases its workspace, and says on stderr where its
    summary is; exit 0 as the run scored."""
    out = tmp_path / "runs"
    proc = subprocess.Popen([*CLI, *RUN, "--out", str(out)], env=_env(data_root, tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        first = [proc.stdout.readline() for _ in range(2)]  # type: ignore[union-attr]
        proc.stdout.close()  # type: ignore[union-attr]  # head has what it wanted
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert first[1].startswith("run "), first
    run_dir, result = _only_run(out)
    assert proc.returncode == 0, err
    assert result["state"] == "scored", result["state"]
    assert not _mounted_below(tmp_path)
    assert not (run_dir / "workspace.img").exists()
    assert f"`automedbench show {run_dir}` prints its summary" in " ".join(err.split()), err


def _in_a_terminal_that_closes(command: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run `command` on a pseudo-terminal; once the run names its folder, the terminal goes away (its master
    closed: every later write is EIO) and the process gets the SIGHUP a terminal's hang-up sends."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(command, env=env, stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    seen = b""
    try:
        deadline = time.monotonic() + 120
        while b" -> " not in seen and time.monotonic() < deadline:
            try:
                seen += os.read(master, 4096)
            except OSError:
                break
        os.close(master)
        proc.send_signal(signal.SIGHUP)
        return proc.wait(timeout=180), seen.decode(errors="replace")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_a_closed_terminal_ends_the_run_recorded_and_under_nohup_not_at_all(data_root, tmp_path):
    """A terminal closed under a run: the hang-up cancels it, recorded and released (as Ctrl-C); under `nohup`
    (SIGHUP ignored) the run goes on to its score, its lines lost to the closed terminal instead of failing it.
    Before: the hang-up cancelled the nohup run too, and a line written to the closed terminal (EIO) ended a run
    as a retryable infrastructure failure."""
    env = _env(data_root, tmp_path)
    status, seen = _in_a_terminal_that_closes([*CLI, *RUN, "--out", str(tmp_path / "hup")], env)
    assert " -> " in seen, seen
    _, result = _only_run(tmp_path / "hup")
    assert (result["state"], status) == ("cancelled", 128 + signal.SIGHUP), (result["state"], result["end_reason"])
    assert "SIGHUP" in result["error"], result["error"]
    status, seen = _in_a_terminal_that_closes([*NOHUP_CLI, *RUN, "--out", str(tmp_path / "nohup")], env)
    assert " -> " in seen, seen
    _, result = _only_run(tmp_path / "nohup")
    assert (result["state"], status) == ("scored", 0), (result["state"], result["error"])
    assert not _mounted_below(tmp_path)


def test_a_sweep_piped_into_a_reader_that_stops_early_runs_every_run(data_root, tmp_path):
    """`sweep ... 2>&1 | head -1` (here: its progress on stderr, read for one line): the sweep's next progress
    line was the end of it. Now every run is made and recorded in the manifest, nothing left mounted."""
    out = tmp_path / "sweep"
    proc = subprocess.Popen([*CLI, "sweep", "--agents", "reference", "--tasks", "toy/vowels", "--repeats", "2",
                             "--workers", "1", "--out", str(out), "--data-root", str(data_root)],
                            env=_env(data_root, tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        proc.stderr.readline()  # type: ignore[union-attr]  # "sweep plan: 2 run(s) ..." (what it will take)
        proc.stderr.close()  # type: ignore[union-attr]
        out_text, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    runs = json.loads((out / "sweep.json").read_text())["runs"]
    assert proc.returncode == 0 and len(runs) == 2, (proc.returncode, runs)
    assert out_text.startswith("sweep: 2 run(s)"), out_text  # stdout, still read, has the sweep's last lines
    assert {r["state"] for r in runs.values()} == {"scored"}, runs
    assert not _mounted_below(tmp_path)


def test_a_metrics_declared_counts_print_as_counts_in_the_terminal_and_on_the_page(cli, tmp_path):
    """VQA's "skipped" and "placeholders" printed "0.000" in the terminal and on the page: the count rule read
    names (`*_count`, `*_cases`) and whole values above 1. The metric now declares its counts (`counts` of the
    Task block, kept in result.json), so a count of 0 is "0" wherever it is printed."""
    work = tmp_path / "eval"
    made = cli("evaluate", "--task", "vqa/demo", "--baseline", "perfect", "--out", work, "--no-pictures")
    assert made.exit_code == 0, made.output
    task = RunFolder(work).load_result().task
    assert {"answered", "skipped", "placeholders"} <= set(task.counts), task.counts
    assert task.components["skipped"] == task.components["placeholders"] == 0
    for name in ("skipped", "placeholders"):
        assert re.search(rf"\b{name} 0\b(?!\.)", made.output), made.output
        assert f"{name} 0.000" not in made.output
    page = tmp_path / "page.html"
    assert cli("view", work, "--out", page, "--no-pictures").exit_code == 0
    text = page.read_text()
    assert "skipped 0 ·" in text and "placeholders 0 ·" in text, text
    assert "skipped 0.000" not in text
    assert re.search(r"accuracy \d\.\d{3}", text)  # a score keeps its three places
    assert fmt_component(0.0, "skipped") == "0.000"  # undeclared, a zero reads as the score it might be
    assert fmt_component(0.0, "skipped", task.counts) == "0"


def test_a_segmentation_case_with_no_lesion_says_its_lesion_dice_is_not_in_the_task(cli, tmp_path):
    """The per-case table showed lesion Dice 1.000 for a case with no lesion (both masks empty: 1 by convention),
    as if it were a perfect score the Task counted; the Task's lesion Dice is the mean over the cases with a
    lesion. The row now says so, the cases with one are shown as before."""
    work = tmp_path / "eval"
    made = cli("evaluate", "--task", "segmentation/demo", "--baseline", "perfect", "--out", work, "--no-pictures")
    assert made.exit_code == 0, made.output
    task = RunFolder(work).load_result().task
    negative = [r for r in task.per_case if not r["lesion_positive"]]
    positive = [r for r in task.per_case if r["lesion_positive"]]
    assert negative and positive and task.components["lesion_positive_cases"] == len(positive)
    assert all(r["lesion_dice"] == 1.0 and "lesion_dice" in r[CASE_LEFT_OUT] for r in negative)
    assert not any(CASE_LEFT_OUT in r for r in positive)
    page = tmp_path / "page.html"
    assert cli("view", work, "--out", page, "--no-pictures").exit_code == 0
    rows = dict(re.findall(r'<tr id="case-\d+"><td>([^<]+)</td>(.*?)</tr>', page.read_text()))
    note = "(not in the Task: no lesion in the reference"
    assert all(note in rows[r["case_id"]] for r in negative), rows
    assert not any(note in rows[r["case_id"]] for r in positive)
    assert CASE_LEFT_OUT not in page.read_text()  # a note beside the value, not a column of its own
