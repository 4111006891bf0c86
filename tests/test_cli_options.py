"""One run configuration: RunOptions declares each field's flag, help and whether it changes a score; the
header hash covers exactly the score-changing fields; run, evaluate and sweep expose the same flags."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import click
import pytest
from automedbench.agent import Agent
from automedbench.cli import main
from automedbench.fsutil import sha256_text
from automedbench.options import META, RunOptions, click_options, flag_of, from_cli, score_record
from automedbench.records import AgentTurn, ToolCall
from automedbench.serialize import dumps, from_dict
from automedbench_campaign.sweep import PER_RUN, SweepConfig, run_template
from click.testing import CliRunner
from review_steps import register_agent

VQA = "vqa/demo"
# fields a user never sets on a command line: a sweep sets the run id and its own id and size, its executor the node
NO_FLAG = {"run_id", "node", "sweep"}
# what each command builds its run configuration from (the rest of its flags are its own)
EXPOSED = {
    "run": {f.name for f in attrs.fields(RunOptions)} - NO_FLAG,
    "evaluate": {"task", "data_root", "task_score", "eval_options", "pictures"},
    "sweep": {f.name for f in attrs.fields(RunOptions)} - NO_FLAG - set(PER_RUN) - {"keep_workspace"},
}


def options_hash(options: RunOptions) -> str:
    return sha256_text(dumps(score_record(options)))


def other_value(options: RunOptions, name: str) -> Any:
    """A valid value for field `name` that differs from the one `options` holds."""
    value = getattr(options, name)
    special = {"tier": "pro", "task_score": "partial", "memory_mb": 1024}
    if name in special:
        return special[name]
    if isinstance(value, bool):
        return not value
    if isinstance(value, dict):
        return {**value, "changed": "1"}
    if isinstance(value, Path) or name in ("out", "data_root"):
        return Path("/elsewhere")
    if isinstance(value, str):
        return value + "-changed"
    return 7  # the None-able numbers: max_turns, time_limit_s, exec_timeout_s


def test_every_score_changing_field_changes_the_header_hash_and_no_other_does():
    base = RunOptions("segmentation/demo", "lite", "reference", run_id="r1", data_root=Path("/data"))
    changed, unchanged = set(), set()
    for f in attrs.fields(RunOptions):
        variant = attrs.evolve(base, **{f.name: other_value(base, f.name)})
        assert getattr(variant, f.name) != getattr(base, f.name), f.name
        (changed if options_hash(variant) != options_hash(base) else unchanged).add(f.name)
    scoring = {f.name for f in attrs.fields(RunOptions) if f.metadata[META].scores}
    assert changed == scoring
    # the score-changing set, written out: eval_options (it changes VQA scores) is in it; placement is not
    assert scoring == {"tier", "agent", "sandbox", "judge", "agent_options", "judge_options", "max_turns",
                       "time_limit_s", "exec_timeout_s", "memory_mb", "task_score", "eval_options",
                       "workspace_quota_mb", "repeat_limit"}
    assert {"out", "data_root", "gpus", "keep_workspace", "run_id", "node", "task", "warm_evaluator"} <= unchanged


def test_runoptions_keeps_its_import_path_and_positional_order():
    from automedbench import runner

    assert runner.RunOptions is RunOptions
    o = RunOptions("t", "pro", "a", "docker", "llm", Path("o"), Path("d"), {"x": "1"}, {"y": "2"}, 3, 4.0, 5.0, 6,
                   "strict")
    assert (o.sandbox, o.judge, o.max_turns, o.time_limit_s, o.exec_timeout_s, o.memory_mb, o.task_score) == (
        "docker", "llm", 3, 4.0, 5.0, 6, "strict")


def command(name: str) -> click.Command:
    found = main.get_command(click.Context(main), name)
    assert found is not None, name
    return found


@pytest.mark.parametrize("name", sorted(EXPOSED))
def test_each_command_exposes_its_fields_with_a_flag_and_help(name):
    fields = attrs.fields_dict(RunOptions)
    params = {p.name: p for p in command(name).params if p.name in fields}
    assert set(params) == EXPOSED[name]
    for field_name, param in params.items():
        assert param.opts and all(o.startswith("--") for o in param.opts), field_name
        assert param.opts[0] == flag_of(field_name).decls[0].split("/")[0]
        assert isinstance(param, click.Option) and param.help and param.help.strip(), field_name


def test_every_field_but_run_id_and_node_declares_a_flag_with_help():
    for f in attrs.fields(RunOptions):
        flag = f.metadata[META]
        assert bool(flag.decls) == (f.name not in NO_FLAG), f.name
        assert not flag.decls or flag.help.strip(), f.name
    assert attrs.fields_dict(SweepConfig)["run"].type in (RunOptions, "RunOptions")  # the options, not a copy
    assert not set(attrs.fields_dict(SweepConfig)) & (set(attrs.fields_dict(RunOptions)) - {"run_id"})


def test_sweep_help_tells_the_two_gpu_flags_apart():
    text = CliRunner().invoke(main, ["sweep", "--help"], terminal_width=200).output
    assert "--gpus IDS" in text and "--gpus-per-run" in text and "--exec-timeout" in text and "--eval-option" in text
    gpus = next(p for p in command("sweep").params if p.name == "gpus").help
    per_run = next(p for p in command("sweep").params if p.name == "gpus_per_run").help
    assert "CUDA_VISIBLE_DEVICES" in gpus and "--gpus-per-run" in gpus and "reserves" in per_run and "--gpus" in per_run


def test_click_options_parse_into_field_values():
    @click.command()
    @click_options("agent", "agent_options", "out", "max_turns", agent={"required": True})
    def probe(**fields):
        click.echo(json.dumps({k: str(v) for k, v in from_cli(fields).items()}, sort_keys=True))
        assert not fields  # every field was taken out

    result = CliRunner().invoke(probe, ["--agent", "x", "--agent-option", "a=1=2", "--out", "~/o"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {"agent": "x", "agent_options": "{'a': '1=2'}",
                                         "out": str(Path("~/o").expanduser()), "max_turns": "None"}
    assert "Missing option '--agent'" in CliRunner().invoke(probe, []).output
    with pytest.raises(ValueError, match="node"):
        click_options("node")


# ---------------------------------------------------------------- sweep, end to end through the CLI


class EnvProbe(Agent):
    """Prints the GPUs its sandbox sees, then runs one call longer than a 1 s per-call timeout, then submits."""

    name = "options-env-probe"

    def __init__(self) -> None:
        self.turn = 0

    def next_turn(self, messages):
        self.turn += 1
        code = {1: "import os; print('GPUS=' + os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>'))",
                2: "import time; time.sleep(6)"}.get(self.turn)
        if code:
            return AgentTurn(f"step {self.turn}", [ToolCall(f"c{self.turn}", "execute_code",
                                                            json.dumps({"language": "python", "code": code}))])
        if self.turn == 3:
            return AgentTurn("submit", [ToolCall("s", "submit_results", "{}")])
        return AgentTurn("done", [])


def test_sweep_passes_exec_timeout_eval_options_and_gpus_to_each_run(reg, data_root, tmp_path, monkeypatch):
    from automedbench import runner
    from automedbench.trajectory import read_events

    register_agent(reg, EnvProbe)
    seen: list[RunOptions] = []
    original = runner.Run.__init__

    def spy(self, options, registry, progress=None):
        seen.append(options)
        original(self, options, registry, progress)

    monkeypatch.setattr(runner.Run, "__init__", spy)
    out = tmp_path / "runs"
    result = CliRunner().invoke(main, [
        "sweep", "--agents", EnvProbe.name, "--tasks", VQA, "--executor", "inline", "--out", str(out),
        "--data-root", str(data_root), "--no-require-isolation", "--retries", "0",
        "--exec-timeout", "1", "--eval-option", "raw_fallback=true", "--gpus", "3"])
    assert result.exit_code == 0, result.output
    assert len(seen) == 1
    options = seen[0]
    assert (options.exec_timeout_s, options.eval_options, options.gpus) == (1.0, {"raw_fallback": "true"}, "3")
    manifest = json.loads((out / "sweep.json").read_text())
    assert manifest["options"]["exec_timeout_s"] == 1.0 and manifest["options"]["gpus"] == "3"
    (run_id,) = manifest["runs"]
    assert manifest["runs"][run_id]["state"] in ("scored", "agent_failure")
    calls = [e for e in read_events(out / run_id / "trajectory.jsonl") if e.get("name") == "execute_code"]
    assert "GPUS=3" in calls[0]["stdout"]  # --gpus reached the sandbox's environment
    assert calls[1]["timed_out"] and calls[1]["duration_s"] < 5  # --exec-timeout cut the 6 s call
    stored = json.loads((out / run_id / "result.json").read_text())
    assert stored["header"]["hashes"]["options"] == options_hash(options)
    assert options_hash(options) != options_hash(attrs.evolve(options, eval_options={}))


@pytest.mark.parametrize(("args", "says"), [
    (["--exec-timeout", "0"], "--exec-timeout"),
    (["--gpus"], "--gpus"),
    (["--eval-option", "raw_fallback"], "KEY=VALUE"),
    (["--eval-option", "no_such_option=1"], "no evaluation option 'no_such_option'"),
])
def test_bad_sweep_options_are_one_line_and_exit_2(args, says, data_root, tmp_path):
    result = CliRunner().invoke(main, ["sweep", "--agents", "noop", "--tasks", VQA, "--executor", "inline",
                                       "--out", str(tmp_path / "runs"), "--data-root", str(data_root),
                                       "--no-require-isolation", *args])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in result.output
    assert not (tmp_path / "runs" / "sweep.json").exists()


def test_bad_run_eval_option_is_one_line_and_exit_2(data_root, tmp_path):
    result = CliRunner().invoke(main, ["run", "--task", VQA, "--agent", "noop", "--out", str(tmp_path),
                                       "--data-root", str(data_root), "--eval-option", "raw_fallback"])
    assert result.exit_code == 2
    assert [line for line in result.stderr.splitlines() if line.strip()] == [
        "error: option 'raw_fallback' must look like KEY=VALUE"]


def test_every_executor_gets_the_shared_fields_in_a_plain_payload(tmp_path):
    """Local workers and Ray tasks receive the payload as plain data and rebuild RunOptions from it."""
    from automedbench_campaign.sweep import RunSpec, Sweep

    config = SweepConfig.of(["a"], ["t/x"], ["lite"], out=tmp_path, exec_timeout_s=9.0, gpus="0,1",
                            eval_options={"k": "v"}, agent_options={"model": "m"}, max_turns=4, require_isolation=False)
    spec = RunSpec("a", "t/x", "pro", 2)
    payload = json.loads(json.dumps(Sweep(config, registry=None).payload(spec)))
    options = from_dict(payload["options"], RunOptions)
    for name in set(attrs.fields_dict(RunOptions)) - set(PER_RUN):
        assert getattr(options, name) == getattr(config.run, name), name
    assert config.run == run_template(out=tmp_path, exec_timeout_s=9.0, gpus="0,1", eval_options={"k": "v"},
                                      agent_options={"model": "m"}, max_turns=4, require_isolation=False)
    assert (options.task, options.tier, options.agent, options.run_id) == ("t/x", "pro", "a", spec.run_id)
