"""What a user sees, leftovers of round 25: an earlier run's outputs scored against a demo staged anew since gave
another score with no word why; detection's duplicate and diagnostic counts printed as scores (`0.000`);
enhancement's output range and change from the input had no unit; the LDCT picture's grey window was the data's
range, not a soft-tissue one, and no picture said which window it shows."""

from __future__ import annotations

import html
import re
import shutil

import pytest
import test_cli_newuser
from automedbench.runfolder import RunFolder

cli = test_cli_newuser.cli  # the new user's command line (CliRunner, errors as a pipe sees them), shared


def test_an_earlier_runs_outputs_scored_on_a_demo_staged_anew_say_the_references_changed(cli, tmp_path, monkeypatch):
    """`evaluate --submission RUN/submission` after the demo was staged anew (its track's code changed: a fresh
    secret) scored differently with no word why. The run's header keeps its staging's digests: where they differ
    from the staging scored now, one line names what differs, that the references changed, the run's own score and
    that a demo's earlier staging cannot be made again; while they agree, no line."""
    data = tmp_path / "data"
    monkeypatch.setenv("AUTOMEDBENCH_DATA", str(data))  # a staging of this test's own, staged anew below
    made = cli("run", "--task", "toy/vowels", "--agent", "reference", "--out", tmp_path / "runs")
    assert made.exit_code == 0, made.output
    (run,) = (tmp_path / "runs").iterdir()
    before = RunFolder(run).load_result().header.hashes["private_data"]
    same = cli("evaluate", "--task", "toy/vowels", "--submission", run / "submission")
    assert same.exit_code == 0, same.output
    assert "staging" not in same.output, same.output  # the same staging: nothing to say
    shutil.rmtree(data / "toy" / "vowels")  # staged anew on the next command, as after a change of its code
    again = cli("evaluate", "--task", "toy/vowels", "--submission", run / "submission")
    assert again.exit_code == 0, again.output
    said = " ".join(again.output.split())
    (line,) = re.findall(r"note: this submission is run .*? automedbench show \S+", said)
    now = (data / "toy" / "vowels" / "staging.json").read_text()
    assert before[:8] in line and f"references {before[:8]} -> " in line and before not in now, line
    assert run.name in line and "other references" in line and "(it scored 1.000)" in line, line
    assert "cannot be made again" in line and line.endswith(str(run)), line



def test_detection_counts_print_as_whole_numbers(cli, tmp_path):
    """Detection's cross_class_duplicates and the detectors' diagnostics (cases, true positives) are counts: a 0
    printed `0.000`, as a score. The metric declares them; the terminal prints `0`."""
    work = tmp_path / "eval"
    made = cli("evaluate", "--task", "detection/demo", "--baseline", "empty", "--out", work, "--no-pictures")
    assert made.exit_code == 0, made.output
    metric = RunFolder(work).load_result().task
    names = ("cross_class_duplicates", "diag_normalised_cases", "diag_tp_agnostic", "diag_tp_xy_swapped")
    said = " ".join(made.output.split())
    for name in names:
        assert name in metric.counts and metric.components[name] == 0, (name, metric.counts)
        assert re.search(rf"\b{name} 0(?![.\d])", said), (name, said)


@pytest.mark.parametrize("task,unit", [("enhancement/demo-ldct", "HU"), ("enhancement/demo-sr", None)])
def test_enhancement_intensities_carry_the_tasks_unit(cli, tmp_path, task, unit):
    """Each case's out_min, out_max and rms_change_from_input had no unit on the run page, beside PSNR's dB: on a CT
    task they are Hounsfield units, headed so; a super-resolution task's images are normalised, headed bare."""
    work, page = tmp_path / "eval", tmp_path / "page.html"
    made = cli("evaluate", "--task", task, "--baseline", "constant", "--out", work, "--no-pictures")
    assert made.exit_code == 0, made.output
    units = RunFolder(work).load_result().task.units
    assert cli("view", work, "--out", page, "--no-pictures").exit_code == 0
    text = page.read_text()
    for name in ("out_min", "out_max", "rms_change_from_input"):
        assert units.get(name) == unit, (name, units)
        suffix = f' <span class="muted">({unit})</span>' if unit else ""
        assert f'<th class="n">{name}{suffix}</th>' in text, name


NUMBERS = r"\[[-\d.e]+, [-\d.e]+\]"


@pytest.mark.parametrize("task,legend", [
    ("enhancement/demo-ldct", r"soft-tissue grey window W 400 L 40 HU \(\[-160, 240\] HU\) for all three"),
    ("enhancement/demo-sr", rf"grey window {NUMBERS} \(the reference's 1st-99th percentile\) for all three"),
    ("synthesis/demo", rf"grey window {NUMBERS} HU for all three: the target CT's 1st-99th percentile"),
])
def test_a_pictures_legend_states_its_grey_window(cli, tmp_path, task, legend):
    """The LDCT picture showed CT on [-1024, 273] (the reference's percentiles of the metric's clip range): soft
    tissue a near-white grey, and the legend gave bare numbers with no unit. A CT task's picture is on the soft-tissue
    window (W 400 L 40 HU), said in its legend; the others' legends say which window (and whose) they show."""
    work, page = tmp_path / "eval", tmp_path / "page.html"
    made = cli("evaluate", "--task", task, "--baseline", "constant", "--out", work)
    assert made.exit_code == 0, made.output
    assert cli("view", work, "--out", page).exit_code == 0
    text = html.unescape(page.read_text())
    cases = len(list((work / "pictures").glob("case-*.png")))
    assert cases >= 2 and len(re.findall(legend, text)) >= cases, legend  # each case's legend says it
