"""A new user's walk, round 25: what each demo leaves a user reading. A task's page on the site gave a Task column
and a chart with no word of what the Task scores, and the track's page cut report generation's metric mid-word;
without bubblewrap the run warned but named no way to an isolated run, and where the fallback was refused it
blamed `local-plain`, a sandbox the user never chose; segmentation's run page pushed each case's links off the
table behind a one-line note."""

from __future__ import annotations

import re

import pytest
import test_cli_newuser
from automedbench.plugins import registry
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
