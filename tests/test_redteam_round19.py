"""Red team round 19: what this session relaxed, attacked through the real runner and CLI.

A model's reply holding a JSON number past Python's 4,300-digit int limit (valid JSON; `json.loads` raises a
plain ValueError, not JSONDecodeError) crashed the chat agent's loop in the text-call recovery and in the
structured calls' argument repair: the run ended agent_failure (agent_error) instead of the model being told."""

from __future__ import annotations

import pytest
from test_backends_fakes import openai_reply, serve_fake_llm
from test_backends_openweight import KEY_ENV, run_cli

fake_llm = pytest.fixture(serve_fake_llm, name="fake_llm")

HUGE = "1" * 5000
CALL = '{"name": "execute_code", "arguments": {"language": "python", "code": "print(1)", "n": ' + HUGE + "}}"
SUBMIT = '```json\n{"name": "submit_results", "arguments": {}}\n```'


@pytest.mark.parametrize("shape", ["fenced", "bare", "hermes"])
def test_a_text_call_with_a_huge_number_is_told_not_a_crash(fake_llm, monkeypatch, tmp_path, data_root, shape):
    monkeypatch.setenv(KEY_ENV, "sk-fake")
    text = {"fenced": f"```json\n{CALL}\n```", "bare": f"Running:\n{CALL}",
            "hermes": f"<tool_call>{CALL}</tool_call>"}[shape]
    fake_llm.push(openai_reply(text), openai_reply(SUBMIT))
    result, events, _ = run_cli(fake_llm, tmp_path, data_root, "openai", "continues=1", "text_tool_calls=true")
    assert (result.state, result.end_reason) == ("scored", "submitted"), result.error
    (nudge,) = [e for e in events if e["type"] == "no_tool_call"]
    assert nudge["action"] == "continue"
    if shape != "hermes":  # the hint reads fenced and bare calls
        assert nudge["hint"] == "invalid_json" and "number too long" in nudge["detail"], nudge


def test_a_structured_call_with_a_huge_number_is_answered_not_a_crash(fake_llm, monkeypatch, tmp_path, data_root):
    monkeypatch.setenv(KEY_ENV, "sk-fake")
    args = CALL.split('"arguments": ', 1)[1][:-1]
    fake_llm.push(openai_reply("", [("c1", "execute_code", args)]),
                  openai_reply("", [("c2", "submit_results", "{}")]))
    result, events, _ = run_cli(fake_llm, tmp_path, data_root, "openai", "continues=1")
    assert (result.state, result.end_reason) == ("scored", "submitted"), result.error
    (told,) = [e for e in events if e["type"] == "tool" and e["name"] == "execute_code"]
    assert "exit_code" not in told or told["exit_code"] is None, told  # not run


def test_an_installed_cli_s_log_line_python_refuses_is_skipped_not_the_run_s_end(reg, data_root, tmp_path):
    """The CLI agent's own log (written in the sandbox: the agent's) is read line by line and a line that is not
    JSON is skipped; a huge number or a deep nesting raised ValueError / RecursionError out of drain_events and
    ended the whole run agent_failure."""
    from automedbench.runner import Run, RunOptions
    from automedbench.trajectory import read_events

    lines = ['{"type": "message", "content": "before"}', '{"type": "message", "n": ' + HUGE + "}",
             "[" * 100_000 + "]" * 100_000, '{"type": "message", "content": "after"}']
    (tmp_path / "log.txt").write_text("\n".join(lines) + "\n")
    spec = tmp_path / "odd-cli.yaml"
    spec.write_text("name: odd-cli\nfiles: {odd.log: log.txt}\ncommand: cp {dir}/odd.log {log}\n"
                    "log_format: steps-jsonl\n")
    runner = Run(RunOptions("segmentation/demo", "lite", "cli", out=tmp_path / "runs", data_root=data_root,
                            agent_options={"spec": str(spec)}), reg)
    result = runner.execute()
    assert result.state == "scored", result.error
    imported = [e["content"] for e in read_events(runner.run_dir / "trajectory.jsonl") if e.get("imported")]
    assert imported == ["before", "after"]


@pytest.mark.parametrize("option", ["overflow_retries=-1", "timeout_s=nan", "max_tokens=0", "length_retries=-2",
                                    "temperature=inf"])
def test_a_model_option_out_of_range_is_refused_in_one_line_before_any_run_folder(monkeypatch, tmp_path, data_root,
                                                                                   option):
    """overflow_retries=-1 ran and ended agent_error (UnboundLocalError in the agent loop); timeout_s=nan and
    max_tokens=0 made every call fail: each a run folder with a failed run for a typo on the command line."""
    from automedbench.cli import main
    from click.testing import CliRunner

    monkeypatch.setenv(KEY_ENV, "sk-fake")
    out = tmp_path / "runs"
    args = ["run", "--task", "segmentation/demo", "--agent", "openai", "--out", str(out), "--data-root",
            str(data_root), "--quiet"]
    for opt in ("model=m", "base_url=http://127.0.0.1:9/v1", f"api_key_env={KEY_ENV}", option):
        args += ["--agent-option", opt]
    cli = CliRunner().invoke(main, args)
    assert cli.exit_code == 2 and option.split("=")[0] in cli.output and "Traceback" not in cli.output, cli.output
    assert not out.exists() or not any(out.iterdir())
