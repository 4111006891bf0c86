"""A demanding user's walk, round 18: what a researcher, a track author and someone swapping the judge met at
the command line (options a component does not take, a demo whose metric cannot run on this machine, two
models of one judge backend compared, long silent waits, options without help), each through the CLI."""

from __future__ import annotations

import json
import os
import shutil
import types
from pathlib import Path

import attrs
import click
import pytest
import test_cli_newuser
from automedbench.cli import main
from automedbench.hookspecs import hookimpl
from automedbench.judges.rules import RulesJudge
from automedbench.plugins import Registry
from click.testing import CliRunner

cli = test_cli_newuser.cli  # the new user's command line (CliRunner, errors as a pipe sees them), shared


def _one_line(result, needle: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert needle in lines[0], lines[0]


@pytest.mark.parametrize("args,needle", [
    (["--agent", "reference", "--agent-option", "foo=1"], "the reference agent takes no options (--agent-option foo"),
    (["--agent", "noop", "--judge-option", "model=gpt-4o"], "the rules judge takes no options (--judge-option model"),
    (["--agent", "scripted", "--agent-option", "varient=skip-validate"],
     "unknown scripted agent option(s) varient (did you mean 'variant'?); known: variant"),
])
def test_an_option_a_component_does_not_take_is_one_line_and_no_run(cli, tmp_path, args, needle):
    """Before: a TypeError traceback (exit 1) from the agent's or judge's factory."""
    out = tmp_path / "runs"
    _one_line(cli("run", "--task", "toy/vowels", *args, "--out", out, "--quiet"), needle)
    assert not out.exists() or not any(out.iterdir())


def test_a_sweep_refuses_an_option_its_agents_do_not_take_before_any_run(cli, tmp_path):
    """Before: every run ended infrastructure_failure, retried twice, exit 3."""
    out = tmp_path / "sweep"
    _one_line(cli("sweep", "--agents", "reference,noop", "--tasks", "toy/vowels", "--agent-option", "model=x",
                  "--out", out), "the reference agent takes no options (--agent-option model=...); every agent of a "
              "sweep gets the same --agent-option: sweep reference in a sweep of its own")
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize("gpus", ["all", "0;1", "cuda:0"])
def test_gpu_ids_that_cuda_would_not_read_are_refused(cli, tmp_path, gpus):
    """`--gpus all` went into CUDA_VISIBLE_DEVICES as it stood: a run without the GPU it asked for, silently."""
    out = tmp_path / "runs"
    needle = f"--gpus takes device ids separated by commas, e.g. 0 or 0,1 (or GPU-/MIG- UUIDs), not {gpus!r}"
    _one_line(cli("run", "--task", "toy/vowels", "--agent", "noop", "--gpus", gpus, "--out", out), needle)
    _one_line(cli("sweep", "--agents", "noop", "--tasks", "toy/vowels", "--gpus", gpus, "--out", out), needle)
    assert not out.exists() or not any(out.iterdir())
    from automedbench.options import gpu_ids

    assert gpu_ids(" 0, 1 ") == "0,1" and gpu_ids("GPU-8a2c-44f1") == "GPU-8a2c-44f1" and gpu_ids("") == ""


def _path_without(program: str, tmp_path: Path) -> str:
    """A PATH holding every program of this one but `program`: links in one folder."""
    folder = tmp_path / f"no-{program}"
    folder.mkdir()
    for entry in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(entry):
            continue
        for name in os.listdir(entry):
            link = folder / name
            if name != program and not link.exists() and os.access(os.path.join(entry, name), os.X_OK):
                link.symlink_to(os.path.join(entry, name))
    return str(folder)


def test_a_task_whose_metric_cannot_run_here_is_refused_before_the_agent_starts(cli, tmp_path, monkeypatch,
                                                                                 data_root):
    """Without Java the report demo ran the agent, then scored Task 0, rating F, exit 0: a reference run rated F on
    the leaderboard through no fault of the agent. Now run, evaluate and sweep refuse in one line naming the fix,
    and `tasks` marks the task not ready."""
    monkeypatch.setenv("PATH", _path_without("java", tmp_path))
    assert shutil.which("java") is None
    out = tmp_path / "runs"
    fix = "report_gen/demo cannot be scored on this machine: METEOR needs Java"
    _one_line(cli("run", "--task", "report_gen/demo", "--agent", "reference", "--out", out), fix)
    _one_line(cli("evaluate", "--task", "report_gen/demo", "--baseline", "perfect"), fix)
    _one_line(cli("sweep", "--agents", "reference", "--tasks", "report_gen/demo", "--out", out), fix)
    assert "apt-get install default-jre-headless" in cli("evaluate", "--task", "report_gen/demo", "--baseline",
                                                          "perfect").stderr
    assert not out.exists() or not any(out.iterdir())
    listing = CliRunner().invoke(main, ["tasks"], terminal_width=250, catch_exceptions=False)
    row = next(line for line in listing.output.splitlines() if "report_gen/demo " in line)
    assert row.split("│")[2].strip() == "no", row
    assert "not ready: report_gen/demo: METEOR needs Java" in listing.output
    # a track that runs no program of its own is unaffected: segmentation scores as before
    seg = cli("evaluate", "--task", "segmentation/demo", "--baseline", "perfect")
    assert seg.exit_code == 0 and "Rating A" in seg.output


class _HarshJudge(RulesJudge):
    """The rules judge with one option: `harsh=1` fails every item it grades (a stricter model of one backend)."""

    name = "amb-harsh"

    def __init__(self, harsh: str = "0") -> None:
        self.harsh = harsh == "1"
        self.version = f"1/harsh={int(self.harsh)}"

    def grade(self, judge_input):
        verdict = super().grade(judge_input)
        if self.harsh:
            verdict.items = [attrs.evolve(item, value=0.0) if not item.auto else item for item in verdict.items]
        return verdict


class _DownJudge(RulesJudge):
    """An LLM judge whose endpoint does not answer."""

    name = "amb-down"

    def grade(self, judge_input):
        raise ConnectionError("POST http://127.0.0.1:9/v1/chat/completions: connection refused")


@pytest.fixture()
def harsh_registry(monkeypatch):
    module = types.ModuleType("amb_harsh_judge")

    @hookimpl
    def automedbench_register_judges(register):
        register("amb-harsh", _HarshJudge, "test: the rules judge, or every item failed with harsh=1")
        register("amb-down", _DownJudge, "test: a judge whose endpoint does not answer")

    module.automedbench_register_judges = automedbench_register_judges
    reg = Registry()
    reg.load_entry_points()
    reg.add_plugin(module, name="amb-harsh")
    monkeypatch.setattr("automedbench.cli.registry", lambda: reg)
    return reg


def test_agreement_between_two_option_sets_of_one_judge_backend_grades_each_with_its_own(harsh_registry, run_agent,
                                                                                          tmp_path):
    """Two models of one backend (`--judge-a openai --judge-b openai`, other models) were graded by one judge made
    with the first side's options, and stored verdicts were matched by backend name: agreement 1.0 whatever the
    models said. Each side now has its own judge; stored verdicts, which do not say their options, are not used."""
    _, run_dir = run_agent("reference")
    runner = CliRunner()

    def agreement(*extra: str):
        return runner.invoke(main, ["judge-agreement", str(run_dir), "--judge-a", "amb-harsh", "--judge-b",
                                    "amb-harsh", "--json", *extra], catch_exceptions=False)

    same = agreement()
    assert same.exit_code == 0, same.output
    assert json.loads(same.output)["pooled"]["agreement"] == 1.0
    differ = agreement("--judge-a-option", "harsh=0", "--judge-b-option", "harsh=1")
    assert differ.exit_code == 0, differ.output
    report = json.loads(differ.output)
    assert report["runs"] == 1 and report["pooled"]["n"] > 0
    assert report["pooled"]["agreement"] < 0.5  # the reference passes what the harsh side fails
    refused = agreement("--judge-b-option", "harsh=1", "--stored-only")
    _one_line(refused, "a stored verdict does not say which options graded it")
    _one_line(agreement("--judge-b-option", "harhs=1"),
              "unknown amb-harsh judge option(s) harhs (did you mean 'harsh'?)")


def test_a_run_regraded_by_another_model_says_which_model_graded_it(harsh_registry, run_agent, tmp_path):
    """The summary named the judge's backend only (`judge openai`): after swapping the judge's model a user could not
    tell from `show` which model's verdict the stages hold. The verdict's version (an LLM judge's `1/<model>`) is
    shown beside it."""
    _, source = run_agent("reference")
    run_dir = tmp_path / source.name  # a result is signed for its folder's name
    shutil.copytree(source, run_dir, ignore=shutil.ignore_patterns("workspace"))
    runner = CliRunner()
    shown = runner.invoke(main, ["show", str(run_dir)], terminal_width=200, catch_exceptions=False)
    assert "judge rules (version 1)" in shown.output
    regraded = runner.invoke(main, ["rejudge", str(run_dir), "--judge", "amb-harsh", "--judge-option", "harsh=1"],
                             terminal_width=200, catch_exceptions=False)
    assert regraded.exit_code == 0, regraded.output
    shown = runner.invoke(main, ["show", str(run_dir)], terminal_width=200, catch_exceptions=False)
    assert "judge amb-harsh (version 1/harsh=1)" in shown.output
    assert json.loads((run_dir / "judge.json").read_text())["judge_version"] == "1/harsh=1"


def test_a_judge_that_could_not_grade_says_why_in_the_summary(harsh_registry, cli, tmp_path):
    """S1–S3 were null with only "a stage is null" under the table; the judge's error (an endpoint down, a key
    refused) was in result.json and the run page but not in the terminal, nor how to grade later."""
    result = cli("run", "--task", "toy/vowels", "--agent", "reference", "--judge", "amb-down", "--quiet",
                 "--out", tmp_path / "runs")
    assert result.exit_code == 1, result.output  # recorded, not graded (polish5: it exited 0)
    (line,) = [x for x in result.stdout.splitlines() if "the judge could not grade" in x]
    assert "connection refused" in line and "automedbench rejudge <run folder> --judge amb-down" in line
    assert "Agentic null" in result.stdout


def test_a_long_wait_says_it_is_still_working(cli, tmp_path, monkeypatch):
    """Scoring the report demo was ~30 s of silence after one line (METEOR's Java); off a terminal a line every
    interval now says the run is still working, and on which step."""
    import automedbench.evaluate_cmd as evaluate_module
    import automedbench.runner as runner_module

    scored = runner_module.run_isolated

    def slow(*args, **kwargs):
        import time

        time.sleep(0.6)
        return scored(*args, **kwargs)

    monkeypatch.setattr(runner_module, "run_isolated", slow)
    monkeypatch.setattr(evaluate_module, "run_isolated", slow)
    monkeypatch.setenv("AUTOMEDBENCH_PROGRESS_S", "0.1")
    result = cli("run", "--task", "toy/vowels", "--agent", "reference", "--out", tmp_path / "runs")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("scoring ") and "evaluator" in line)
    ticks = [line for line in lines[start + 1:] if "still working" in line]
    assert ticks and all("scoring in the isolated evaluator" in line for line in ticks[:2])
    assert lines.index(ticks[0]) == start + 1  # shown under the step it waits on, before the judge's line
    assert not any("still working" in line for line in lines if line.startswith("Agentic"))
    # `evaluate` waits on the same evaluator: said on stderr, the result on stdout unchanged
    alone = cli("evaluate", "--task", "toy/vowels", "--baseline", "perfect")
    assert alone.exit_code == 0 and "Rating A" in alone.stdout and "still working" not in alone.stdout
    assert "scoring toy/vowels in the isolated evaluator: still working" in alone.stderr


def test_every_option_of_every_command_says_what_it_does():
    """`--help` explains every option: stage's and validate-task's --data-root, codes' --tagger-option and
    judge-agreement's --runs-dir and judge options had no help."""
    ctx = click.Context(main)
    bare = []
    for name in main.list_commands(ctx):
        command = main.get_command(ctx, name)
        groups = [(f"{name} {sub}", command.get_command(ctx, sub)) for sub in command.list_commands(ctx)] \
            if isinstance(command, click.Group) else [(name, command)]
        for label, cmd in groups:
            bare += [f"{label} {p.opts[0]}" for p in cmd.params
                     if isinstance(p, click.Option) and p.name != "help" and not (p.help or "").strip()]
    assert not bare, bare
    run_help = CliRunner().invoke(main, ["run", "--help"], terminal_width=200).output
    for shown in ("local-plain", "docker", "rules (offline, deterministic)", "model=NAME"):
        assert shown in run_help


def test_the_run_page_shows_each_cases_own_metric_in_the_tracks_order(amb_run, tmp_path):
    """The run page's case table kept the first 8 per-case values by name: VQA's score and token F1 (and
    enhancement's SSIM, report generation's METEOR) were never shown. Now the track's order, its metric first."""
    import re

    result, run_dir = amb_run("vqa/demo", "reference")
    page = tmp_path / "page.html"
    shown = CliRunner().invoke(main, ["view", str(run_dir), "--out", str(page)], catch_exceptions=False)
    assert shown.exit_code == 0, shown.output
    table = page.read_text().split('id="cases"', 1)[1].split("</table>", 1)[0]
    header = re.findall(r"<th[^>]*>([^<]*)</th>", table.split("</tr>", 1)[0])
    assert header[:3] == ["case", "status", "score"], header
    assert {"token_f1", "exact_match"} <= set(header) and "valid" not in header
    rows = re.findall(r'<tr id="case-\d+"><td>([^<]*)</td><td>.*?</td><td class="n">([^<]*)</td>', table)
    scores = {row["case_id"]: row["score"] for row in result.task.per_case}
    assert len(rows) == len(scores) > 8
    assert all(float(cell) == pytest.approx(scores[case], abs=1e-3) for case, cell in rows)


def test_the_wait_line_never_outlives_its_wait_when_events_come_from_two_threads():
    """An installed agent's gateway reports steps from its own thread: two starts at once must not leave a ticker
    printing "still working" under the summary."""
    import io
    import threading

    from automedbench.progress import WaitTicker
    from rich.console import Console

    ticker = WaitTicker(Console(file=io.StringIO(), force_terminal=False))
    threads = [threading.Thread(target=lambda n=n: [ticker.start(f"step {n}.{i}") for i in range(20)])
               for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ticker.stop()
    assert not [t for t in threading.enumerate() if t.name == "wait-ticker"]


def test_the_case_tables_columns_do_not_depend_on_which_case_comes_first(tmp_path):
    """The columns are capped at 8: in a VQA staging whose first case is a multiple-choice question, its label keys
    came first and pushed the open questions' exact_match and token_f1 off the table (a fresh clone's staging
    decides the order). Values (numbers, flags) now come ahead of labels, each group in the track's order."""
    import re

    from automedbench.engine import RunFolder
    from automedbench_campaign.viewer.runpage import MAX_VALUE_COLUMNS, _task

    labels = {k: "x" for k in ("kind", "answer_key", "gold_key", "question_key", "form", "answer_text_key",
                               "gold_text_key", "option_key")}
    per_case = [{"case_id": "q1", "score": 1.0, **labels, "valid": True},
                {"case_id": "q2", "score": 0.5, **labels, "exact_match": 0.0, "token_f1": 0.5, "yes_no_strict": False}]
    html = _task({"task": {"per_case": per_case}}, None, None, RunFolder(tmp_path), pictures=False)
    table = html.split('id="cases"', 1)[1].split("</table>", 1)[0]
    header = re.findall(r"<th[^>]*>([^<]*)</th>", table.split("</tr>", 1)[0])
    values = header[2:2 + MAX_VALUE_COLUMNS]
    assert values[:4] == ["score", "exact_match", "token_f1", "yes_no_strict"], header
    assert values[4:] == ["kind", "answer_key", "gold_key", "question_key"] and "valid" not in header
    assert "4 more per-case values not shown" in html
