"""The command line: bad input gives one clear line and a non-zero exit; nothing crashes."""

from __future__ import annotations

import pytest
from automedbench.cli import main
from click.testing import CliRunner


@pytest.fixture()
def cli(data_root, staged, monkeypatch):
    monkeypatch.setenv("AUTOMEDBENCH_DATA", str(data_root))
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(main, list(args), catch_exceptions=False)

    return invoke


@pytest.mark.parametrize("args,needle", [
    (["run", "--task", "segmentation/dem", "--agent", "reference"], "did you mean 'segmentation/demo'"),
    (["run", "--task", "segmentation/demo", "--agent", "refrence"], "unknown agent 'refrence'"),
    (["run", "--task", "segmentation/demo", "--agent", "reference", "--sandbox", "nope"], "unknown sandbox 'nope'"),
    (["run", "--task", "segmentation/demo", "--agent", "reference", "--judge", "nope"], "unknown judge 'nope'"),
    (["evaluate", "--task", "segmentation/demo"], "exactly one of --submission"),
    (["evaluate", "--task", "segmentation/demo", "--baseline", "perfekt"], "unknown baseline 'perfekt'"),
    (["show", "no-such-run"], "no such file"),
    (["run", "--task", "segmentation/demo", "--agent", "reference", "--agent-option", "oops"], "KEY=VALUE"),
])
def test_bad_input_is_one_clear_line(cli, args, needle):
    result = cli(*args)
    assert result.exit_code == 2
    assert needle in result.output
    assert "Traceback" not in result.output


def test_unknown_tier_is_rejected_by_click(cli):
    result = cli("run", "--task", "segmentation/demo", "--agent", "reference", "--tier", "ultra")
    assert result.exit_code == 2 and "ultra" in result.output


def test_missing_data_root(cli, tmp_path):
    result = cli("evaluate", "--task", "segmentation/demo", "--baseline", "perfect",
                 "--data-root", str(tmp_path / "nowhere"))
    assert result.exit_code == 0  # demo tasks stage themselves into a new root
    assert "Rating A" in result.output


def test_evaluator_past_its_limit_is_one_clear_line(cli, monkeypatch):
    """`evaluate` of a submission that runs the evaluator out of memory printed a traceback."""
    from automedbench import evaluator

    monkeypatch.setattr(evaluator, "EVAL_MEMORY_MB", 64)  # too little for any submission
    monkeypatch.setenv("AUTOMEDBENCH_WARM_EVALUATOR", "0")  # a fresh evaluator takes the limit (a warm one has its own)
    result = cli("evaluate", "--task", "segmentation/demo", "--baseline", "empty")
    assert result.exit_code == 1, result.output
    assert "submission error: the evaluator ran out of memory (64 MB)" in result.output
    assert "Traceback" not in result.output


def test_evaluate_scores_on_the_evaluator_a_run_would(cli, reg, monkeypatch, evaluators_asked):
    """`evaluate` took a cold evaluator even where a run of the same process scores warm (a test session: one
    interpreter, track and scorers per command); now warm where installed, cold with AUTOMEDBENCH_WARM_EVALUATOR=0."""
    import os

    warm = "warm" in reg.components["evaluator"] and os.environ.get("AUTOMEDBENCH_WARM_EVALUATOR") != "0"
    first = cli("evaluate", "--task", "segmentation/demo", "--baseline", "perfect")
    monkeypatch.setenv("AUTOMEDBENCH_WARM_EVALUATOR", "0")
    second = cli("evaluate", "--task", "segmentation/demo", "--baseline", "perfect")
    assert first.exit_code == second.exit_code == 0, first.output + second.output
    assert evaluators_asked == ["warm" if warm else "process", "process"]
    for result in (first, second):  # the same verdicts either way
        assert "strict 1.000  partial 1.000" in result.output and "Rating A" in result.output, result.output


def test_real_task_not_staged_names_the_fix(cli, reg, tmp_path, monkeypatch):
    from automedbench import staging
    from automedbench.errors import UserError

    track, task = reg.task("segmentation/demo")
    import attrs

    real = attrs.evolve(task, demo=False)
    with pytest.raises(UserError, match="automedbench stage segmentation/demo --from PATH"):
        staging.ensure(track, real, tmp_path)


@pytest.mark.slow  # a whole demo run through the CLI
def test_run_then_show_rerenders(cli, tmp_path):
    out = tmp_path / "runs"
    result = cli("run", "--task", "segmentation/demo", "--agent", "reference", "--out", str(out), "--quiet")
    assert result.exit_code == 0, result.output
    assert "Overall" in result.output and "Rating A" in result.output
    run_dir = next(out.iterdir())
    shown = cli("show", run_dir.name, "--runs", str(out), "--items")
    assert shown.exit_code == 0
    assert "s3_validate" in shown.output and "Overall" in shown.output
    as_json = cli("show", str(run_dir), "--json")
    assert '"state": "scored"' in as_json.output


def test_relative_out_folder(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = cli("run", "--task", "segmentation/demo", "--agent", "noop", "--out", "rel-runs", "--quiet")
    assert result.exit_code == 0, result.output
    assert "state scored" in result.output
    assert (tmp_path / "rel-runs").is_dir()


def test_plugins_lists_components_with_distribution(cli):
    result = cli("plugins")
    assert result.exit_code == 0
    for needle in ("segmentation", "automedbench-segmentation", "reference", "local", "rules", "segmentation-lesion"):
        assert needle in result.output


@pytest.mark.slow  # validate-task evaluates every baseline
def test_validate_task_passes_for_the_demo(cli):
    result = cli("validate-task", "segmentation/demo")
    assert result.exit_code == 0, result.output
    assert "perfect baseline scores 1.0 / A" in result.output and "FAIL" not in result.output


def test_help_explains(cli):
    result = cli("run", "--help")
    assert "--tier" in result.output and "strict" in result.output


def test_scripted_agent_on_a_real_task_is_refused_without_leftovers(cli, tmp_path):
    import json

    out, data = tmp_path / "runs", tmp_path / "data"
    staged = data / "segmentation" / "kidney"
    for sub in ("public/kidney_001", "private/kidney_001"):
        (staged / sub).mkdir(parents=True)
    (staged / "staging.json").write_text(json.dumps({"format": 2, "case_ids": ["kidney_001"], "public_sha256": "x",
                                                     "private_sha256": "y"}))
    result = cli("run", "--task", "segmentation/kidney", "--agent", "reference", "--out", str(out),
                 "--data-root", str(data))
    assert result.exit_code == 2
    assert "reference solution covers the phantom demo" in result.output
    assert not out.exists() or not any(out.iterdir())


def test_evaluate_refuses_to_overwrite_a_folder(cli, tmp_path):
    out = tmp_path / "eval"
    first = cli("evaluate", "--task", "segmentation/demo", "--baseline", "empty", "--out", str(out))
    assert first.exit_code == 0 and (out / "result.json").exists()
    before = (out / "result.json").read_bytes()
    again = cli("evaluate", "--task", "segmentation/demo", "--baseline", "perfect", "--out", str(out))
    assert again.exit_code == 2 and "already holds files" in again.output
    assert (out / "result.json").read_bytes() == before


def test_every_option_explains_itself(cli):
    import re

    for command in ("run", "evaluate", "sweep"):
        text = cli(command, "--help").output
        options = re.findall(r"^\s+(--[a-z-]+)", text, re.M)
        metavar = r"(?: (?:[A-Z][A-Z_=.,-]*|\[[a-z|]+\]))*"  # TEXT, KEY=VALUE, INTEGER RANGE, [a|b]
        bare = [o for o in options if re.search(rf"^\s+{o}{metavar}\s*(?:\[[^\]]*\])?\s*$", text, re.M)]
        assert not bare, f"{command}: options without help: {bare}"


def test_validate_task_on_missing_or_unstaged_data_is_one_line_exit_2(cli, tmp_path):
    """As `run` and `evaluate`: a real task not staged under the data root (missing or present) is a user error."""
    for root in (tmp_path / "nowhere", tmp_path):
        result = cli("validate-task", "segmentation/kidney", "--data-root", str(root))
        assert result.exit_code == 2, result.output
        assert result.output.count("\n") == 1 and "error:" in result.output
        assert "does not exist" in result.output or "not staged" in result.output
        run = cli("evaluate", "--task", "segmentation/kidney", "--baseline", "empty", "--data-root", str(root))
        assert run.exit_code == 2 and run.output.splitlines()[0] == result.output.splitlines()[0]
