"""A demanding user's walk, round 19: what a researcher comparing agents and a track author met after and around a
run (a track's name where a task id goes, a picture legend written for another modality, a null value shown as
nothing, judge commands that refused a sweep's folder, an installed plugin that fails to load called "not
installed"), each through the CLI."""

from __future__ import annotations

import re

import pytest
import test_cli_newuser
from automedbench.api import CASE_LEFT_OUT
from automedbench.cli import main
from click.testing import CliRunner
from test_ux_round18 import _one_line  # exit 2 and one line on stderr holding the needle

cli = test_cli_newuser.cli  # the new user's command line (CliRunner, errors as a pipe sees them), shared


@pytest.mark.parametrize("command", [
    ["run", "--task", "segmentation", "--agent", "reference"],
    ["sweep", "--agents", "noop", "--tasks", "segmentation", "--dry-run"],
    ["evaluate", "--task", "Segmentation", "--baseline", "perfect"],
    ["validate-task", "segmentation"],
])
def test_a_track_name_given_as_a_task_names_that_tracks_tasks(cli, tmp_path, command):
    """`--task segmentation` answered "did you mean 'segmentation/feta'?" (the nearest id by spelling) before all
    60 task ids of every track: the user had typed a track, and wanted its tasks, the demo first."""
    result = cli(*command, *(["--out", tmp_path / "out"] if command[0] in ("run", "sweep") else []))
    _one_line(result, "is a track, not a task: give one of its tasks, e.g. segmentation/demo (its tasks: ")
    line = result.stderr.strip()
    listed = line.split("(its tasks: ", 1)[1].rstrip(")").split(", ")
    assert "segmentation/demo" in listed and all(t.startswith("segmentation/") for t in listed), line
    assert "did you mean" not in line
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_misspelt_task_id_still_gets_its_nearest_id(cli):
    """The track hints are for a bare track name and a track not installed: a typo keeps "did you mean"."""
    _one_line(cli("run", "--task", "segmentation/dmeo", "--agent", "reference"), "did you mean 'segmentation/demo'")
    _one_line(cli("run", "--task", "segmentaton/demo", "--agent", "reference"), "did you mean 'segmentation/demo'")


def test_a_new_tracks_task_before_its_package_is_installed_says_to_install_it(cli, tmp_path):
    """A track author ran `new-track petct`, then `run --task petct/demo` before `pip install -e`: the answer was
    "did you mean 'detection/demo'?" and 60 task ids. It now says no track petct is installed, and how one is."""
    assert cli("new-track", "petct", "--dir", tmp_path).exit_code == 0
    result = cli("run", "--task", "petct/demo", "--agent", "reference", "--out", tmp_path / "runs")
    _one_line(result, "unknown task 'petct/demo': no track 'petct' is installed (installed: ")
    line = result.stderr.strip()
    assert "segmentation" in line and "pip install -e <its folder>" in line and "did you mean" not in line, line


def _legend(page: str) -> str:
    found = re.search(r'<h3 id="pictures">Cases in pictures</h3><p class="note">([^<]*)</p>', page)
    assert found, "no picture legend on the page"
    return found.group(1)


@pytest.mark.parametrize("task,present,absent", [
    ("vqa/demo", ["question, answer and gold under it"], ["mask", "boxes"]),
    ("detection/demo", ["output boxes orange", "reference boxes green"], ["mask"]),
    ("segmentation/demo", ["masks: organ red, lesion green"], ["boxes"]),
    ("enhancement/demo-ldct", ["the images as they are, no overlay"], ["mask", "boxes"]),
])
def test_the_picture_legend_says_what_this_tracks_pictures_show(amb_run, tmp_path, task, present, absent):
    """Every run page's pictures had one legend: "masks in one colour per label, output boxes orange, reference
    boxes green" under a VQA image with its question and answer, and under a denoised CT slice, and never said which
    colour was the organ and which the lesion. The evaluator now records what it drew over each picture (and what
    a track's mask labels are) and the legend says only that."""
    _, run_dir = amb_run(task, "reference")
    page = tmp_path / "page.html"
    shown = CliRunner().invoke(main, ["view", str(run_dir), "--out", str(page)], catch_exceptions=False)
    assert shown.exit_code == 0, shown.output
    legend = _legend(page.read_text())
    for words in present:
        assert words in legend, legend
    for words in absent:
        assert words not in legend, legend


def test_a_value_the_metric_could_not_compute_reads_null_on_the_page(run_agent, tmp_path):
    """The terminal printed `lpips_mean_valid null` (enhancement's LPIPS without its weights), the run page an empty
    cell after the name, as if the value were lost; the page now says null too, in the components and per case."""
    import json

    run_dir = test_cli_newuser._copy_run(run_agent("reference")[1], tmp_path)
    path = run_dir / "result.json"
    data = json.loads(path.read_text())
    data["task"]["components"]["lpips_mean_valid"] = None
    # a case whose lesion Dice is in the Task: a case with no lesion says so beside its value (ux24), and which
    # case has none follows the staging's secret draw
    counted = next(row for row in data["task"]["per_case"] if CASE_LEFT_OUT not in row)
    counted["lesion_dice"] = None
    path.write_text(json.dumps(data))  # no longer as signed: the page says unverified and still shows it
    page = tmp_path / "page.html"
    shown = CliRunner().invoke(main, ["view", str(run_dir), "--out", str(page)], catch_exceptions=False)
    assert shown.exit_code == 0, shown.output
    html = page.read_text()
    assert 'lpips_mean_valid <span class="muted">null</span>' in html
    row = re.search(rf'<tr id="case-\d+"><td>{re.escape(counted["case_id"])}</td>.*?</tr>', html).group(0)
    assert '<td class="n"><span class="muted">null</span></td>' in row, row


def test_rejudge_and_judge_agreement_take_a_folder_of_runs(run_agent, tmp_path):
    """`leaderboard`, `codes` and `verify` take a sweep's folder; `rejudge sweep/` and `judge-agreement sweep/` said
    "not a run folder (no result.json); it holds 2 run(s)", and README's `judge-agreement runs/*` met sweep.json.
    Both now take the folder's runs, each once."""
    import json

    sweep = tmp_path / "sweep"
    for agent in ("reference", "skip-validate"):
        test_cli_newuser._copy_run(run_agent(agent)[1], sweep)
    (sweep / "sweep.json").write_text("{}")
    runner = CliRunner()
    agreed = runner.invoke(main, ["judge-agreement", str(sweep), str(sweep), "--judge-a", "rules", "--judge-b",
                                  "rules", "--regrade", "--json"], catch_exceptions=False)
    assert agreed.exit_code == 0, agreed.output
    assert json.loads(agreed.stdout)["runs"] == 2
    regraded = runner.invoke(main, ["rejudge", str(sweep), "--judge", "rules"], catch_exceptions=False)
    assert regraded.exit_code == 0, regraded.output
    assert regraded.stdout.count("re-graded ") == 2, regraded.output
    empty = tmp_path / "empty"
    empty.mkdir()
    refused = runner.invoke(main, ["rejudge", str(empty), "--judge", "rules"], catch_exceptions=False)
    assert refused.exit_code == 2 and "not a run folder (no result.json)" in refused.output, refused.output


class _FailingEntryPoint:
    """An installed plugin's entry point whose import fails (a broken install, a missing dependency of its own)."""

    def __init__(self, ep) -> None:
        self.name, self.dist, self.value, self.group = ep.name, ep.dist, ep.value, ep.group

    def load(self):
        raise ImportError(f"cannot import name 'helper' from '{self.value.split(':')[0]}'")


@pytest.fixture
def broken(monkeypatch):
    """The command line's registry with the detection track's and the models built-in's entry points failing."""
    import importlib.metadata as md

    from automedbench.plugins import Registry

    real = md.entry_points

    def entry_points(**kwargs):
        return [_FailingEntryPoint(ep) if ep.name in ("detection", "models") else ep for ep in real(**kwargs)]

    monkeypatch.setattr(md, "entry_points", entry_points)
    reg = Registry()
    reg.load_entry_points()
    monkeypatch.setattr(md, "entry_points", real)
    monkeypatch.setattr("automedbench.cli.registry", lambda **_: reg)
    return reg


def test_an_installed_plugin_that_fails_to_load_is_not_called_not_installed(cli, broken, tmp_path):
    """With automedbench-detection installed but failing to import, `run --task detection/demo` said "is a task of
    the detection track, which is not installed: pip install 'automedbench[detection]'" and `tasks` listed its tasks
    as not installed: the install it named was there, and installing again changed nothing. Now the one line says
    it is installed, failed to load, and why; so for a built-in's component (`--agent openai`)."""
    out = tmp_path / "runs"
    result = cli("run", "--task", "detection/demo", "--agent", "reference", "--out", out)
    assert result.exit_code == 2, result.output
    line = result.stderr.strip().splitlines()[-1]
    assert ("track 'detection' comes with automedbench-detection, which is installed but failed to load "
            "(ImportError: cannot import name 'helper' from 'automedbench_detection.plugin')") in line, line
    assert "pip install" not in line and "not installed" not in line, line
    assert not out.exists() or not any(out.iterdir())
    agent = cli("run", "--task", "toy/vowels", "--agent", "openai", "--out", out)
    assert agent.exit_code == 2
    assert ("agent 'openai' comes with automedbench-models, which is installed but failed to load"
            in agent.stderr.strip().splitlines()[-1]), agent.stderr
    listing = cli("tasks")
    assert listing.exit_code == 0, listing.output
    assert "not loaded: detection/bccd, detection/demo" in listing.stdout
    assert "not installed: detection/" not in listing.stdout


def test_a_finished_sweep_names_the_command_that_compares_its_runs(cli, tmp_path):
    """A sweep ended on its manifest's path: the researcher had to find in the README that `leaderboard` (not
    `show`, which takes one run) compares the runs. It now ends with that command for its folder, which works."""
    import json
    import shlex

    out = tmp_path / "sweep folder"
    swept = cli("sweep", "--agents", "reference,noop", "--tasks", "toy/vowels", "--executor", "inline", "--out", out)
    assert swept.exit_code == 0, swept.output
    (line,) = [x for x in swept.stdout.splitlines() if x.startswith("compare: ")]
    command = shlex.split(line.removeprefix("compare: ").split(" (--site", 1)[0])
    assert command[:2] == ["automedbench", "leaderboard"] and command[2] == str(out), line
    board = cli(*command[1:], "--json", tmp_path / "board.json", "--quiet")
    assert board.exit_code == 0, board.output
    rows = json.loads((tmp_path / "board.json").read_text())["rows"]
    assert {r["agent"] for r in rows} == {"reference", "noop"}, rows


def test_tasks_says_which_tasks_are_staged_and_how_to_stage_the_rest(cli, tmp_path):
    """`tasks` marked segmentation/kidney Ready; `run` then said it was not staged: which tasks can run now, and what
    the others need first, was learnt one refusal at a time. `tasks` now names those staged under the data root."""
    root = tmp_path / "data"
    assert cli("stage", "toy/vowels", "--data-root", root).exit_code == 0
    listing = cli("tasks", "--data-root", root)
    assert listing.exit_code == 0, listing.output
    (line,) = [x for x in listing.stdout.splitlines() if x.startswith("staged under ")]
    assert line.startswith(f"staged under {root}: toy/vowels; not staged: "), line
    assert "dataset task(s), each staged once from its download before it runs: automedbench stage TASK --from PATH" \
        in line, line
    empty = cli("tasks", "--data-root", tmp_path / "none")
    assert f"staged under {tmp_path / 'none'}: none;" in empty.stdout, empty.stdout


def test_evaluate_out_keeps_each_cases_picture_for_its_page(cli, tmp_path):
    """`evaluate --out DIR` kept result.json but drew no pictures: `view DIR` said "the run was made with
    --no-pictures", and a researcher scoring a submission saw no case. It now draws them (--no-pictures leaves
    them out) and names the command that writes the page."""
    import json

    out = tmp_path / "scored"
    result = cli("evaluate", "--task", "segmentation/demo", "--baseline", "perfect", "--out", out)
    assert result.exit_code == 0, result.output
    assert f"page: automedbench view {out}" in result.stdout, result.stdout
    index = json.loads((out / "pictures" / "index.json").read_text())
    assert len([c for c in index["cases"] if c["file"]]) == 5, index
    page = tmp_path / "page.html"
    assert cli("view", out, "--out", page).exit_code == 0
    assert len(re.findall(r'<figure class="case"', page.read_text())) == 5
    bare = cli("evaluate", "--task", "segmentation/demo", "--baseline", "perfect", "--out", tmp_path / "bare",
               "--no-pictures")
    assert bare.exit_code == 0 and not (tmp_path / "bare" / "pictures").exists(), bare.output


def test_a_b_rating_names_where_a_starts(cli, tmp_path):
    """The enhancement demo's reference rated "B (task 0.960 >= 0.9522 (okay))": why not A was in the task file
    only. A B now says where A starts (the task's own band); a C already named B's."""
    import shutil

    from automedbench.plugins import registry

    _, task = registry().task("toy/vowels")
    perfect = cli("evaluate", "--task", "toy/vowels", "--baseline", "perfect", "--out", tmp_path / "perfect")
    assert perfect.exit_code == 0, perfect.output
    submission = tmp_path / "submission"
    shutil.copytree(tmp_path / "perfect" / "baseline", submission)
    for case in sorted(p for p in submission.iterdir() if p.is_dir())[:2]:  # 4 of 6 right: between the bands
        answer = case / "answer.txt"
        answer.write_text(str(int(answer.read_text()) + 1))
    result = cli("evaluate", "--task", "toy/vowels", "--submission", submission)
    assert result.exit_code == 0, result.output
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("Agentic ")]
    assert f"Rating B (task 0.666 >= {task.rating.okay} (okay; A from {task.rating.good}))" in line, line
