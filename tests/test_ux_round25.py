"""A new user's walk, round 25: what each demo leaves a user reading. A task's page on the site gave a Task column
and a chart with no word of what the Task scores, and the track's page cut report generation's metric mid-word;
without bubblewrap the run warned but named no way to an isolated run, and where the fallback was refused it
blamed `local-plain`, a sandbox the user never chose; segmentation's run page pushed each case's links off the
table behind a one-line note; PSNR and the HU errors were printed with no unit, as one more score."""

from __future__ import annotations

import re
import shlex
import sys

import pytest
import test_cli_newuser
from automedbench.plugins import registry
from automedbench.report import fmt
from automedbench.runfolder import RunFolder
from automedbench.sandbox import BWRAP_NEXT_STEP
from automedbench_campaign import site

cli = test_cli_newuser.cli  # the new user's command line (CliRunner, errors as a pipe sees them), shared
RUN = ("run", "--task", "toy/vowels", "--agent", "reference")


def test_a_tasks_page_on_the_site_says_what_the_task_measures(cli, tmp_path):
    """The task page (`leaderboard --site`) had the scores, a chart and the command, and not what the Task is; a
    track's page cut a metric at 400 characters (report_gen/demo's "... Strict: any inv [… 19 more characters
    not shown]")."""
    out, made = tmp_path / "runs", tmp_path / "site"
    assert cli(*RUN, "--out", out, "--quiet").exit_code == 0
    built = cli("leaderboard", out, "--site", made, "--quiet", "--resamples", "100")
    assert built.exit_code == 0, built.output
    (page,) = (made / "task").iterdir()
    text = page.read_text()
    spec = registry().track("toy").task("toy/vowels")
    assert '<h2 id="measures">What it measures</h2>' in text, text[:2000]
    assert f"<p>{spec.title}. Task: {spec.metric}; each run is also graded on the five stages" in text
    assert "Overall is 0.5 Agentic + 0.5 Task" in text
    long_metric = registry().track("report_gen").task("report_gen/demo").metric
    assert len(long_metric) > 400  # the case the cut hid
    listed = site._measures("report_gen", {"report_gen/demo"})
    assert long_metric.replace("'", "&#x27;") in listed and "not shown" not in listed
    assert "not defined by a track installed here" in site._task_measures("toy", "toy/none")


def test_without_bubblewrap_a_run_names_the_way_to_an_isolated_verified_run(cli, tmp_path, monkeypatch):
    """`--sandbox local` without bubblewrap warned "the agent runs as a plain host process ... (sandbox
    local-plain)" and marked the score UNVERIFIED, with no word of what to install for a verified one."""
    import automedbench.sandboxes.local as local

    monkeypatch.setattr(local, "bwrap_path", lambda: None)
    ran = cli(*RUN, "--out", tmp_path / "runs")
    assert ran.exit_code == 0, ran.output
    said = " ".join(ran.output.split())  # as a reader sees it, whatever the terminal's width wrapped
    assert ("no filesystem isolation (sandbox local-plain); for an isolated, verified run "
            f"{BWRAP_NEXT_STEP} UNVERIFIED:") in said, said
    assert "apt-get install bubblewrap" in BWRAP_NEXT_STEP and "--sandbox docker" in BWRAP_NEXT_STEP


@pytest.mark.parametrize("sandbox,needle", [
    ("local", "sandbox local: bubblewrap is not usable here and its fallback, local-plain, is refused: "),
    ("local-plain", "local-plain refused: "),
])
def test_where_the_plain_fallback_is_refused_the_line_names_the_sandbox_chosen(cli, tmp_path, monkeypatch, sandbox,
                                                                               needle):
    """With neither bubblewrap nor a namespace for a plain call, the default `--sandbox local` ended in "error:
    local-plain refused: ..." (a sandbox the user never named); it says now that local fell back and was refused,
    and how to install bubblewrap."""
    import automedbench.sandboxes.local as local

    monkeypatch.setattr(local, "bwrap_path", lambda: None)
    monkeypatch.setattr(local, "pid_namespace_prefix", lambda: ())
    local.plain_namespace_unsupported.cache_clear()
    try:
        refused = cli(*RUN, "--sandbox", sandbox, "--out", tmp_path / "runs")
    finally:
        local.plain_namespace_unsupported.cache_clear()
    assert refused.exit_code == 2 and "Traceback" not in refused.output, refused.output
    (error,) = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert error.startswith(f"error: {needle}") and error.endswith(f"{BWRAP_NEXT_STEP}, or run as root"), error
    assert not list((tmp_path / "runs").glob("*/result.json"))


def test_a_left_out_case_note_wraps_under_its_value_on_the_run_page(cli, tmp_path):
    """Segmentation's page put "1.000 (not in the Task: no lesion in the reference: ...)" on one line in a cell
    that never wraps (a number's): the table grew past the page and each row's outputs/picture links sat behind
    a horizontal scroll. The note is its own wrapping block now, narrower than the sentence."""
    work, page = tmp_path / "eval", tmp_path / "page.html"
    made = cli("evaluate", "--task", "segmentation/demo", "--baseline", "perfect", "--out", work, "--no-pictures")
    assert made.exit_code == 0, made.output
    assert cli("view", work, "--out", page, "--no-pictures").exit_code == 0
    text = page.read_text()
    notes = re.findall(r'<td class="n">1\.000 <span class="left-out">\(not in the Task: ([^<]+)\)</span></td>', text)
    assert notes and all(len(n) > 60 for n in notes), notes  # a sentence, wider than a number's column
    (rule,) = re.findall(r"\.left-out\{([^}]*)\}", text)
    assert "display:block" in rule and "white-space:normal" in rule and "max-width:20em" in rule, rule


@pytest.mark.parametrize("task", ["enhancement/demo-sr", "synthesis/demo"])
def test_psnr_and_hu_errors_are_printed_with_their_units(cli, tmp_path, task):
    """Enhancement and synthesis printed "psnr_mean_valid 42.807" beside "ssim_mean_valid 0.961" (synthesis:
    "mae_hu_mean_valid 11.020"), the terminal and the run page alike: a number with no unit, read as one more
    score. The metric declares each value's unit; both print it, none beside a null."""
    work, page = tmp_path / "eval", tmp_path / "page.html"
    made = cli("evaluate", "--task", task, "--baseline", "constant", "--out", work, "--no-pictures")
    assert made.exit_code == 0, made.output
    metric = RunFolder(work).load_result().task
    assert metric.units["psnr"] == metric.units["psnr_mean_valid"] == "dB"
    psnr = metric.components["psnr_mean_valid"]
    assert psnr is not None and psnr > 1
    said = " ".join(made.output.split())
    assert f"psnr_mean_valid {fmt(psnr)} dB " in said, said
    assert not re.search(r"\bnull (dB|HU)\b", said), said
    assert cli("view", work, "--out", page, "--no-pictures").exit_code == 0
    text = page.read_text()
    assert f"psnr_mean_valid {fmt(psnr)} dB ·" in text
    assert '<th class="n">psnr <span class="muted">(dB)</span></th>' in text
    if task.startswith("synthesis"):
        mae = metric.components["mae_hu_mean_valid"]
        assert f"mae_hu_mean_valid {fmt(mae)} HU" in said and f"mae_hu_mean_valid {fmt(mae)} HU ·" in text


def test_a_null_and_a_stored_result_without_units_print_no_unit():
    """Units are the metric's to declare: a null has none beside it, and a result stored before units were kept
    (no `units`) or a forged one (not a mapping) prints its numbers as before."""
    from automedbench.report import with_unit
    from automedbench_campaign.viewer.runpage import _units

    assert with_unit("null", "psnr", {"psnr": "dB"}) == "null"
    assert with_unit("31.250", "psnr", {"psnr": "dB"}) == "31.250 dB"
    assert with_unit("31.250", "psnr", {}) == "31.250"
    assert _units({}) == {} and _units({"units": ["dB"]}) == {} and _units({"units": {"psnr": 3}}) == {}


def test_a_track_installed_from_the_checkout_is_told_to_install_its_extra_from_there(cli, tmp_path, monkeypatch):
    """`pip install -e . -e plugins/classification` (no `[model]`) then the demo: "needs torch, transformers,
    safetensors ... : pip install 'automedbench-classification[model]'", a distribution on no package index, so
    the line failed as given. A track installed editable from a folder is told to install the extra from that
    folder (`run` and `tasks` alike); one installed from an index keeps the distribution's name."""
    from pathlib import Path

    import attrs
    from automedbench.needs import editable_source, install_line

    track = registry().track("classification")
    declared = type(track).sandbox_needs
    monkeypatch.setattr(type(track), "sandbox_needs", lambda self, task: attrs.evolve(
        declared(self, task), modules=[*declared(self, task).modules, "ux25_absent_module"]))
    source = editable_source("automedbench-classification")
    assert source and Path(source, "pyproject.toml").is_file(), source  # this checkout's plugins/classification
    line = f"pip install -e {shlex.quote(source + '[model]')}"  # quoted for a shell: [model] is a glob
    refused = cli("run", "--task", "classification/demo", "--agent", "reference", "--out", tmp_path / "runs")
    assert refused.exit_code == 2 and "Traceback" not in refused.output, refused.output
    said = " ".join(refused.stderr.split())
    assert said.endswith(f"ux25_absent_module inside the sandbox, which the local sandbox's Python "
                         f"({sys.executable}) cannot import: {line}"), said
    shown = " ".join(cli("tasks", "classification/demo").output.split())
    assert f"ready here: no: {line} (needs ux25_absent_module)" in shown, shown
    needs = attrs.evolve(declared(track, track.task("classification/demo")), install="ux25-not-installed[model]")
    assert install_line(track.task("classification/demo"), needs) == "pip install 'ux25-not-installed[model]'"


def test_a_null_lpips_says_why_in_the_terminal_and_on_the_page(cli, tmp_path):
    """Enhancement printed "lpips_mean_valid null ... composite null" and nothing more: the reason (LPIPS's
    weights not in the torch hub cache) sat in the first case's row, in a column the page left out. The metric's
    `notes` say why a null is null, under the components in the terminal and on the run page."""
    work, page = tmp_path / "eval", tmp_path / "page.html"
    made = cli("evaluate", "--task", "enhancement/demo-sr", "--baseline", "constant", "--out", work, "--no-pictures")
    assert made.exit_code == 0, made.output
    metric = RunFolder(work).load_result().task
    if metric.components["lpips_mean_valid"] is not None:
        pytest.skip("LPIPS's weights are in this machine's torch hub cache: no null to explain")
    why = metric.notes["lpips_mean_valid"]
    assert why.startswith("LPIPS unavailable: ") and "torch hub cache" in why, why
    said = " ".join(made.output.split())
    assert f"lpips_mean_valid null: {why}" in said and "composite null: needs the LPIPS mean" in said, said
    assert cli("view", work, "--out", page, "--no-pictures").exit_code == 0
    assert f'<p class="note">lpips_mean_valid null: {why}</p>' in page.read_text()
