"""An installed or CLI agent whose session exits 0 with too few outputs: the harness submits for it, the task
refuses the submission, and the agent stops. Its last turn said "exited None" (the submit's answer read as the
session's exit code); it says the session's code and that the submission was refused."""

from __future__ import annotations

from automedbench.cli import main
from automedbench.records import Result
from automedbench.serialize import read_json
from automedbench.trajectory import read_events
from click.testing import CliRunner


def test_a_refused_submission_after_a_clean_exit_is_said_so(tmp_path, data_root):
    (tmp_path / "quiet.yaml").write_text("name: quiet-cli\ninstall: echo none\ncommand: echo nothing to do\n"
                                         "log_format: none\n")
    out = tmp_path / "runs"
    cli = CliRunner().invoke(main, ["run", "--task", "enhancement/demo-ldct", "--agent", "cli", "--agent-option",
                                    f"spec={tmp_path / 'quiet.yaml'}", "--out", str(out), "--data-root",
                                    str(data_root), "--quiet"])
    assert cli.exit_code == 0, cli.output
    (run_dir,) = out.iterdir()
    events = read_events(run_dir / "trajectory.jsonl")
    (submit,) = [e for e in events if e["type"] == "tool" and e["name"] == "submit_results"]
    assert submit["refused"] and "submission refused" in submit["result"]["reason"]
    last = [e for e in events if e["type"] == "assistant"][-1]
    assert last["content"] == "quiet-cli exited 0; the submission was refused; stopping."
    result = read_json(run_dir / "result.json", Result)
    assert result.state == "scored" and result.end_reason == "agent_stopped"
