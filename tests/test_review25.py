"""Review round 25 of the changes merged up to a36b0a9, each finding proved by a test here.

- **A run's options were stored and shown with their credentials** (options, ux 23): result.json's
  `header.options` kept every option as typed (a judge's `base_url=http://user:password@host/v1?api_key=...` whole),
  the rerun command masked only up to a password's first `@` and nothing in a URL's query, a program's `args=` or
  a Bearer header; and it masked `max_tokens=777` as `max_tokens=***` (a setting, not a secret: the command did
  not make a run like it); `rejudge` stored the new judge's options as typed too. Now the header keeps the
  options masked (`secretmask`; the options digest is of the values as typed) and the command shows every
  setting but credentials.
- **A result_written subscriber taking some of the hook's arguments** (runner, ux 23): pluggy lets a hook
  implementation name only the arguments it uses, but the runner called each with all of them, so a plugin's
  `automedbench_result_written(run_dir)` failed (TypeError) on every run; `automedbench_run_finished` the same.
  And it was handed the runner's own record: a subscriber that changed it changed what `run` printed and its exit
  status (3 for a scored run) while result.json said scored; each now gets a copy.
- **A provider declared down after its session closed** (gateway, agents 1): the health watch's probe can outlast
  the gateway's join, and it then made `session.stop` through the session folder's descriptor number, closed by
  then and possibly another folder's.
- **judge-agreement's counted-once change was undone** by the ux round 23 commit (cefdda1 removed 77eddf2's code and
  its test: "over 4 run(s)" for two runs); restored, its test in test_redteam_round26.py. And it counted a run at
  its first folder before knowing that folder gave a pair: a skipped first folder left the run's usable second
  one out as "the same run" (0 runs where 1 counts); now a run counts at the first folder that gives both verdicts.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import test_cli_newuser
from automedbench.api import ItemVerdict, Judge, JudgeVerdict, hookimpl
from automedbench.options import rerun_command
from automedbench.plugins import registry
from automedbench.testing import run_cli, run_task

cli = test_cli_newuser.cli  # the new user's command line (CliRunner, errors as a pipe sees them), shared

URL = "http://user:pa@word@127.0.0.1:9/v1?api_key=QSECRET&v=2"


def _only_run(out: Path) -> Path:
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    return run_dir


def test_a_runs_stored_options_and_its_rerun_command_hold_no_credential(cli, tmp_path, monkeypatch):
    """Through `run` and `show`: a judge whose endpoint carries a user:password (one with an @) and a key in its
    query. result.json held both as typed; the command line showed "word@" and the query key, and hid max_tokens."""
    monkeypatch.setenv("R25_KEY", "sk-r25abcdefabcdefabcdefabcdef")
    out = tmp_path / "runs"
    made = cli("run", "--task", "toy/vowels", "--agent", "scripted", "--judge", "openai", "--judge-option",
               f"base_url={URL}", "--judge-option", "api_key_env=R25_KEY", "--judge-option", "model=x",
               "--judge-option", "max_retries=0", "--judge-option", "max_tokens=777", "--out", out, "--quiet")
    assert made.exit_code == 1, made.output  # the judge's endpoint is down: recorded, not graded (polish5)
    run_dir = _only_run(out)
    stored = (run_dir / "result.json").read_text()
    options = json.loads(stored)["header"]["options"]["judge_options"]
    for secret in ("pa@word", "word@", "QSECRET"):
        assert secret not in stored, secret
    assert options["base_url"] == "http://***@127.0.0.1:9/v1?api_key=***&v=2", options
    assert options["max_tokens"] == "777" and options["api_key_env"] == "R25_KEY"
    assert cli("verify", run_dir).exit_code == 0  # the masked header is what the harness signed
    shown = cli("show", run_dir)
    assert shown.exit_code == 0, shown.output
    (line,) = [x for x in shown.output.splitlines() if x.startswith("rerun: ")]
    assert "max_tokens=777" in line and "word@" not in line and "QSECRET" not in line, line
    page = (run_dir / "view.html").read_text()
    assert "QSECRET" not in page and "word@" not in page


@pytest.mark.parametrize(("option", "secret"), [
    ("args=--api-key SECRETA1 --verbose", "SECRETA1"),
    ("args=--token=SECRETA2", "SECRETA2"),
    ("args=-H 'Authorization: Bearer SECRETA3'", "SECRETA3"),
    ('extra_body={"api_key": "SECRETA4", "top_p": 1}', "SECRETA4"),
    ("base_url=https://host/v1?key=SECRETA5", "SECRETA5"),
    ("args=--model m sk-proj-SECRETA6abcdefabcdef", "SECRETA6"),
])
def test_a_command_line_masks_a_credential_inside_a_value(option, secret):
    """An installed agent's `args=` (flags of the program), a JSON body, a URL's query: each showed its key."""
    key, value = option.split("=", 1)
    header = {"task": "t/x", "tier": "lite", "agent": "codex", "sandbox": "local", "judge": "rules",
              "options": {"agent_options": {key: value, "model": "m"}}}
    line = rerun_command(header)
    assert secret not in line and "***" in line, line


def test_a_command_line_shows_settings_named_like_counts_of_tokens():
    """max_tokens=, thinking_tokens= are settings that change a score: shown as `***`, the command made another
    run (and failed to parse as a number when pasted)."""
    header = {"task": "t/x", "tier": "lite", "agent": "openai", "sandbox": "local", "judge": "rules",
              "options": {"agent_options": {"max_tokens": "777", "thinking_tokens": "2048", "access_token": "T0K",
                                            "hf_token": "T1K", "api_key_env": "MY_KEY", "keep_turns": "4"}}}
    line = rerun_command(header)
    for shown in ("max_tokens=777", "thinking_tokens=2048", "api_key_env=MY_KEY", "keep_turns=4",
                  "access_token=***", "hf_token=***"):
        assert shown in line, (shown, line)


def test_a_result_written_subscriber_may_take_only_the_arguments_it_uses(cli, tmp_path):
    """pluggy calls an implementation with the arguments it names; the runner passed all, a TypeError each run."""
    seen: list[Path] = []
    module = types.ModuleType("test_review25_page")

    @hookimpl
    def automedbench_result_written(run_dir: Any) -> None:
        seen.append(Path(run_dir))

    @hookimpl
    def automedbench_run_finished(run_dir: Any) -> None:
        seen.append(Path(run_dir))

    module.automedbench_result_written = automedbench_result_written  # type: ignore[attr-defined]
    module.automedbench_run_finished = automedbench_run_finished  # type: ignore[attr-defined]
    reg = registry()
    reg.add_plugin(module, name=module.__name__)
    try:
        out = tmp_path / "runs"
        made = cli("run", "--task", "toy/vowels", "--agent", "scripted", "--out", out, "--quiet")
    finally:
        reg.remove_plugin(module.__name__)
    assert made.exit_code == 0, made.output
    assert "TypeError" not in made.output, made.output
    run_dir = _only_run(out)
    assert seen == [run_dir, run_dir]
    assert "H-HOOK" not in (run_dir / "result.json").read_text()


def test_a_provider_declared_down_after_the_gateway_closed_makes_no_file(tmp_path):
    """The watch's probe may end after `close()` gave up waiting for it; its `session.stop` went through the
    descriptor number the agent had closed since, which the next folder opened reuses."""
    from automedbench_models.gateway import STOP_NAME, ModelGateway

    session, other = tmp_path / "session", tmp_path / "other"
    session.mkdir()
    other.mkdir()
    gateway = ModelGateway("http://127.0.0.1:9/v1", "openai", "k", model="m", max_calls=5, deadline=1e12)
    fd = os.open(session, os.O_RDONLY | os.O_DIRECTORY)
    gateway.start(fd)
    gateway.close()
    os.close(fd)  # as the installed agent's close() does next
    reused = os.open(other, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert reused == fd  # the lowest number free: the one the gateway kept
        gateway._provider_down()  # what the watch does when its late probe fails
    finally:
        os.close(reused)
    assert not (other / STOP_NAME).exists()
    assert not (session / STOP_NAME).exists()


def test_a_run_graded_again_keeps_the_new_judges_options_without_credentials(cli, tmp_path, monkeypatch):
    """`rejudge --judge openai --judge-option base_url=...` stored the new judge's options in the header as typed.
    The judge answers now (a loopback fake): a judge that cannot grade leaves the run as it was (round 28)."""
    from test_backends_fakes import FakeLLMServer
    from test_ux_round28 import _verdict

    monkeypatch.setenv("R25_KEY", "sk-r25abcdefabcdefabcdefabcdef")
    out = tmp_path / "runs"
    assert cli("run", "--task", "toy/vowels", "--agent", "scripted", "--out", out, "--quiet").exit_code == 0
    run_dir = _only_run(out)
    server = FakeLLMServer().start()
    server.fallback = _verdict
    url = URL.replace("127.0.0.1:9", server.url.removeprefix("http://"))
    try:
        again = cli("rejudge", run_dir, "--judge", "openai", "--judge-option", f"base_url={url}", "--judge-option",
                    "api_key_env=R25_KEY", "--judge-option", "model=x", "--judge-option", "max_retries=0")
    finally:
        server.stop()
    assert server.requests, again.output  # graded by it
    assert again.exit_code == 0, again.output
    stored = (run_dir / "result.json").read_text()
    assert json.loads(stored)["header"]["judge"] == "openai"
    assert "QSECRET" not in stored and "word@" not in stored
    assert cli("verify", run_dir).exit_code == 0


FLAKY = "flaky-test-judge-r25"


class FlakyJudge(Judge):
    """A judge that fails every item, or cannot grade at all while R25_FLAKY is set (an endpoint that is down)."""

    name = FLAKY

    def grade(self, judge_input: Any) -> JudgeVerdict:
        if os.environ.get("R25_FLAKY"):
            return JudgeVerdict(self.name, self.version, [], error="the endpoint did not answer")
        return JudgeVerdict(self.name, self.version,
                            [ItemVerdict(i.id, i.stage, i.description, 0.0, "fails") for i in judge_input.rubric])


@hookimpl
def automedbench_register_judges(register: Any) -> None:
    register(FLAKY, FlakyJudge, "test judge: fails every item, or cannot grade while R25_FLAKY is set")


def test_a_run_whose_first_folder_gave_no_pair_counts_at_its_second(data_root, tmp_path, monkeypatch):
    """judge-agreement counted a run once at its first folder before knowing that folder gave a pair: when that
    one was skipped (a judge that could not grade it), the run's other folder, graded before with that judge and so
    usable, was left out as 'the same run as' the skipped one, and the run counted nowhere."""
    reg = registry()
    name = "test_review25_flaky_judge"
    reg.add_plugin(sys.modules[__name__], name=name)
    try:
        runs, older = tmp_path / "runs", tmp_path / "older"
        _, run_dir = run_task("toy/vowels", "reference", out=runs, data_root=data_root)
        shutil.copytree(run_dir, older / run_dir.name, ignore=shutil.ignore_patterns("workspace"))
        assert run_cli("rejudge", str(older / run_dir.name), "--judge", FLAKY).exit_code == 0  # its verdict kept
        monkeypatch.setenv("R25_FLAKY", "1")  # the endpoint is down now: only a stored verdict of it counts
        done = run_cli("judge-agreement", str(runs), str(older), "--judge-a", "rules", "--judge-b", FLAKY, "--json")
    finally:
        reg.remove_plugin(name)
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["skipped"] == [str(run_dir)], report
    assert report["runs"] == 1 and report["counted_once"] == [], report


def test_a_result_written_subscriber_cannot_change_the_run_as_the_command_reports_it(cli, tmp_path):
    """The subscriber was handed the runner's own record after it was written: one that changed it (a page plugin
    tidying fields) changed what `run` printed and its exit status (3, a retryable failure, for a scored run)
    while result.json said scored."""
    module = types.ModuleType("test_review25_meddler")

    @hookimpl
    def automedbench_result_written(result: Any) -> None:
        result.state, result.end_reason = "infrastructure_failure", "infrastructure_error"

    module.automedbench_result_written = automedbench_result_written  # type: ignore[attr-defined]
    reg = registry()
    reg.add_plugin(module, name=module.__name__)
    try:
        out = tmp_path / "runs"
        made = cli("run", "--task", "toy/vowels", "--agent", "scripted", "--out", out)
    finally:
        reg.remove_plugin(module.__name__)
    assert json.loads((_only_run(out) / "result.json").read_text())["state"] == "scored"
    assert made.exit_code == 0, made.output
    assert "state scored (submitted)" in made.output
