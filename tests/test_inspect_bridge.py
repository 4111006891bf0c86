"""AutoMedBench inside inspect_ai (automedbench-inspect): the same scripted transcript scores the same through
`automedbench run --agent reference` and `inspect eval` with inspect's mockllm model; the log inspect view reads
carries the scores and links the run folder; the run's own rules (repeat limit, breach, budgets) hold for an
inspect agent; the bridge's agent cannot be started outside inspect. The sandbox self-check is its own file."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from automedbench.cli import main
from automedbench.records import Result
from automedbench.serialize import read_json
from automedbench.testing import register_toy_track
from automedbench.trajectory import read_events
from automedbench_inspect import commands  # imports no inspect_ai
from click.testing import CliRunner

if importlib.util.find_spec("inspect_ai") is None:  # found, not imported: collection stays fast
    pytest.skip("inspect_ai is not installed: pip install 'automedbench[inspect]'", allow_module_level=True)

INSPECT = Path(sys.executable).with_name("inspect")
STAGES = ("S1", "S2", "S3", "S4", "S5")


def tool_codes(run_dir: Path) -> list[tuple[str, str, str]]:
    return [(e["name"], e.get("language", ""), e.get("code", "")) for e in read_events(run_dir / "trajectory.jsonl")
            if e["type"] == "tool"]


@pytest.mark.slow  # two whole demo runs, one of them through the inspect command line (inspect imports in ~10 s)
def test_inspect_eval_of_the_reference_transcript_scores_as_automedbench_run(run_agent, data_root, tmp_path):
    ref, ref_dir = run_agent("reference")
    out, logs = tmp_path / "runs", tmp_path / "logs"
    cli = subprocess.run([str(INSPECT), "eval", "automedbench_inspect/segmentation_demo", "--model", "mockllm/model",
                          "--solver", "automedbench_inspect/replay", "-T", f"out={out}", "-T", f"data_root={data_root}",
                          "--log-dir", str(logs), "--display", "none", "--log-format", "eval"],
                         capture_output=True, text=True, timeout=900, env={**os.environ, "NO_COLOR": "1"})
    assert cli.returncode == 0, cli.stderr[-3000:]
    from inspect_ai.log import list_eval_logs, read_eval_log

    (info,) = list_eval_logs(str(logs))
    log = read_eval_log(info)  # what `inspect view` reads
    assert log.status == "success", log.error
    (sample,) = log.samples
    score = sample.scores["automedbench_scorer"]
    run_dir = Path(score.metadata["run_dir"])
    result = read_json(run_dir / "result.json", Result)
    # the same transcript: every call the reference made, in order, with the same code
    assert tool_codes(run_dir) == tool_codes(ref_dir)
    # ... scores the same: S1-S5, Task (strict and partial), Overall and the rating
    for stage in STAGES:
        assert result.stage(stage).score == ref.stage(stage).score, stage
        assert score.value[stage] == ref.stage(stage).score
    assert (result.task.strict, result.task.partial) == (ref.task.strict, ref.task.partial)
    assert score.value["Task"] == ref.aggregate.task and score.value["Overall"] == ref.aggregate.overall
    assert score.answer == ref.aggregate.rating == "A"
    items = {i.id: i.value for s in result.stages for i in s.items}
    assert items == {i.id: i.value for s in ref.stages for i in s.items}
    # the run is the harness's: its header names the bridge and the inspect model, its folder is linked
    assert result.header.agent == "inspect" and result.header.sandbox == "local"
    assert score.metadata["view_html"] == str(run_dir / "view.html") and (run_dir / "view.html").is_file()
    assert score.metadata["state"] == "scored" and score.metadata["end_reason"] == "submitted"
    assert sample.metadata["run_dir"] == str(run_dir)
    assert json.loads((run_dir / "result.json").read_text())["header"]["hashes"]["options"]
    # the model's text and tokens of each turn are in the trajectory the judge reads
    said = [e for e in read_events(run_dir / "trajectory.jsonl") if e["type"] == "assistant"]
    assert said and all(e["content"] for e in said) and all(e["tokens_in"] > 0 for e in said)
    assert result.runtime.turns == ref.runtime.turns and result.runtime.tokens_in > 0
    # the log's metrics: the scorer's, one per score key, the mean over the samples scored
    (scores,) = log.results.scores
    metrics = {name: m.value for name, m in scores.metrics.items()}
    assert list(metrics) == [*STAGES, "Agentic", "Task", "Overall"]
    assert metrics["Overall"] == ref.aggregate.overall and metrics["S3"] == ref.stage("S3").score


# ---------------------------------------------------------------- the run's own rules, through inspect


def toy_eval(tmp_path, calls, own_tools=False, **options):
    """Evaluate the toy task with a react agent whose mockllm model makes `calls` (tool name, arguments), with
    inspect's bash and python tools or (`own_tools`) the run's execute_code."""
    from automedbench_inspect.tasks import automedbench_task, automedbench_tools, inspect_tools
    from inspect_ai import eval as inspect_eval
    from inspect_ai.agent import as_solver, react
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.solver import solver

    register_toy_track()

    @solver
    def scripted():
        async def solve(state, generate):
            outputs = iter([ModelOutput.for_tool_call("mockllm/model", name, args) for name, args in calls])

            def next_output(*_):
                output = next(outputs, None) or ModelOutput.from_content("mockllm/model", "done")
                output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
                return output

            model = get_model("mockllm/model", custom_outputs=next_output)
            tools = automedbench_tools() if own_tools else inspect_tools()
            return await as_solver(react(tools=tools, model=model, submit=False))(state, generate)

        return solve

    task = automedbench_task("toy/vowels", out=str(tmp_path / "runs"), data_root=str(tmp_path / "data"),
                             solver=scripted(), **options)
    (log,) = inspect_eval(task, model="mockllm/model", log_dir=str(tmp_path / "logs"), display="none")
    (sample,) = log.samples
    score = sample.scores["automedbench_scorer"]
    run_dir = Path(score.metadata["run_dir"])
    return sample, score, read_json(run_dir / "result.json", Result), read_events(run_dir / "trajectory.jsonl")


@pytest.mark.slow
def test_a_repeating_inspect_agent_is_told_and_stopped_and_a_breach_is_caught(tmp_path):
    listing = ("bash", {"command": "ls /data/public"})
    sample, score, result, events = toy_eval(tmp_path / "repeat", [listing] * 6, repeat_limit=4)
    told = [m for m in sample.messages if m.role == "tool"]
    assert "NOTE from the harness" not in told[1].text and "3 times in a row" in told[2].text
    assert "run ended (repeated_calls)" in told[3].text
    assert [m.error.type for m in told[4:]] == ["sandbox_unavailable"] * 2  # refused, never run
    assert result.end_reason == "repeated_calls" and result.runtime.tool_calls == 4
    assert any(c["code"] == "E3" and "repeat limit" in c["message"] for c in score.metadata["error_codes"])
    assert [e["streak"] for e in events if e["type"] == "repeated_call"] == [3, 4]

    peek = ("python", {"code": "import glob\nprint([open(p, 'rb').read(9) for p in glob.glob('/data/private/*/*')])"})
    sample, score, result, events = toy_eval(tmp_path / "breach", [peek, listing])
    assert result.isolation.breached and score.metadata["breached"] and score.answer == "F"
    assert score.value["Overall"] == 0.0 and score.value["Task"] == 0.0
    assert [m.error.type for m in sample.messages if m.role == "tool" and m.error] == ["sandbox_unavailable"]

    # the run's own tools, as the brief names them: execute_code (a refused language is told) and submit_results
    calls = [("execute_code", {"language": "python", "code": "print(6 * 7)"}),
             ("execute_code", {"language": "rust", "code": "fn main() {}"}), ("submit_results", {})]
    sample, score, result, events = toy_eval(tmp_path / "own", calls, own_tools=True)
    told = [m.text for m in sample.messages if m.role == "tool"]
    assert told[0].startswith("exit_code: 0\nstdout:\n42")
    assert told[1].startswith("exit_code: 1") and "language ('python' or 'bash')" in told[1]
    assert '"accepted": true' in told[2] and result.end_reason == "submitted" and result.submission.submitted
    assert [(e.get("language"), e.get("error")) for e in events if e["type"] == "tool"] == [
        ("python", None), (None, "bad_arguments"), (None, None)]


def test_the_inspect_agent_outside_inspect_is_one_line_and_exit_2(tmp_path, data_root):
    cli = CliRunner().invoke(main, ["run", "--task", "segmentation/demo", "--agent", "inspect", "--out",
                                    str(tmp_path / "runs"), "--data-root", str(data_root)])
    assert cli.exit_code == 2
    line = cli.output.strip().splitlines()[-1]
    assert "inspect eval automedbench_inspect/" in line and "automedbench[inspect]" in line
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


# ---------------------------------------------------------------- the call mapping


def test_inspects_own_tools_keep_their_code_in_the_trajectory():
    python_tool = commands.exec_call(["bash", "--login", "-c", "python3 -"], True, "print(1)\n", None, None, None, "x")
    assert (python_tool.language, python_tool.code) == ("python", "print(1)\n")
    bash_tool = commands.exec_call(["bash", "--login", "-c", "ls -l /data"], False, None, None, None, None, None)
    assert (bash_tool.language, bash_tool.code) == ("bash", "ls -l /data")
    # anything else: a script that quotes every word (nothing of an argument is run by the shell)
    other = commands.exec_call(["printf", "%s", "$(touch pwned)", "a'b"], True, None, "sub dir", {"K": "v w"}, 5,
                               ".inspect-xfer-1")
    assert other.language == "bash" and other.timed
    assert "'$(touch pwned)'" in other.code and "'a'\"'\"'b'" in other.code
    assert "cd -- 'sub dir'" in other.code and "export K='v w'" in other.code and "timeout -k 1 5 printf" in other.code
    assert other.code.index("exec 0<.inspect-xfer-1") < other.code.index("rm -f -- .inspect-xfer-1")
    # the python tool with options is not taken for plain code
    assert commands.exec_call(["bash", "-c", "python3 -"], True, "print(1)", "/tmp", None, None, "x").language == "bash"
    assert not commands.valid_env_name("A=B") and not commands.valid_env_name("1A") and commands.valid_env_name("_A1")


@pytest.mark.slow  # one inspect eval per variant (the toy task: seconds each, inspect's own start-up aside)
@pytest.mark.parametrize("variant", ["skip-validate"])
def test_a_flawed_scripted_variant_replayed_through_inspect_scores_as_the_run(tmp_path, variant):
    from automedbench.testing import run_task
    from automedbench_inspect.tasks import automedbench_task, replay
    from inspect_ai import eval as inspect_eval

    register_toy_track()
    data = tmp_path / "data"
    ref, ref_dir = run_task("toy/vowels", variant, out=tmp_path / "ref", data_root=data)
    task = automedbench_task("toy/vowels", out=str(tmp_path / "runs"), data_root=str(data), solver=replay(variant))
    (log,) = inspect_eval(task, model="mockllm/model", log_dir=str(tmp_path / "logs"), display="none")
    score = log.samples[0].scores["automedbench_scorer"]
    run_dir = Path(score.metadata["run_dir"])
    result = read_json(run_dir / "result.json", Result)
    assert tool_codes(run_dir) == tool_codes(ref_dir)
    assert [s.score for s in result.stages] == [s.score for s in ref.stages]
    assert (result.task.strict, result.aggregate.overall, result.aggregate.rating) == (
        ref.task.strict, ref.aggregate.overall, ref.aggregate.rating)
    assert result.submission.submitted is ref.submission.submitted is (variant != "no-submit")
    assert sorted(c.code for c in result.error_codes) == sorted(c.code for c in ref.error_codes)
