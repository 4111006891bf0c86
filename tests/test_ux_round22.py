"""A demanding user's walk, round 22: what ux21 left. A misspelt task names the few nearest ids, not all sixty; a
provider host that does not resolve says the gateway uses no proxy; a track missing one requirement is one
"not ready" line, not one per task."""

from __future__ import annotations

import re
import shutil

import test_cli_newuser
from automedbench.cli import main
from automedbench.plugins import registry
from click.testing import CliRunner
from test_ux_round18 import _one_line, _path_without

cli = test_cli_newuser.cli  # the new user's command line (CliRunner, errors as a pipe sees them), shared


def test_a_misspelt_task_names_the_suggestion_and_a_few_close_ids_not_every_task(cli):
    """`automedbench tasks segmentaton/demo` printed all ~60 task ids after the suggestion, which drowned it. Now
    the suggestion, at most four close ids, how many more there are and the command listing them all."""
    result = cli("tasks", "segmentaton/demo")
    _one_line(result, "unknown task 'segmentaton/demo' (did you mean 'segmentation/demo'?); known: segmentation/demo")
    line = result.stderr.strip()
    every = registry().tasks()
    assert len(every) > 10
    named = [t for t in every if re.search(rf"(?<![\w/-]){re.escape(t)}(?![\w-])", line)]
    assert "segmentation/demo" in named and len(named) <= 4, named
    assert f"{len(every) - len(named)} more (`automedbench tasks` lists them all)" in line, line
    # nothing close at all: no names, the count and the command
    _one_line(cli("tasks", "qqqqzzzz"), f"unknown task 'qqqqzzzz'; known: {len(every)} in all (`automedbench tasks` "
                                        "lists them all)")


def test_an_unresolvable_provider_host_says_the_gateway_uses_no_proxy(cli, tmp_path):
    """A user behind an HTTPS proxy only read "cannot be resolved on this machine" and wondered why their proxy
    did not help: the harness's gateway connects to the provider directly. The refusal now says so.
    (`.invalid` is reserved: it resolves nowhere.)"""
    (tmp_path / "bin").mkdir()
    stub = tmp_path / "bin" / "codex"  # the program need not be installed: a stub stands in (it never runs)
    stub.write_text("#!/bin/sh\nexit 0\n")
    stub.chmod(0o755)
    out = tmp_path / "runs"
    result = cli("run", "--task", "toy/vowels", "--agent", "codex", "--agent-option", "api_key_env=none",
                 "--agent-option", f"bin={stub}", "--agent-option", "base_url=https://provider.invalid/v1",
                 "--out", out)
    _one_line(result, "the harness's gateway reaches it from here directly (it uses no HTTP(S)_PROXY, so a "
                      "proxy-only network cannot reach it)")
    assert not out.exists() or not any(out.iterdir())


def test_a_track_missing_one_requirement_is_one_not_ready_line(tmp_path, monkeypatch):
    """Without Java, `automedbench tasks` printed six identical "not ready: report_gen/...: METEOR needs Java"
    lines, one per task. Now one line per track and reason: its demo first, then the same for the others."""
    monkeypatch.setenv("PATH", _path_without("java", tmp_path))
    assert shutil.which("java") is None
    listing = CliRunner().invoke(main, ["tasks"], terminal_width=250, catch_exceptions=False)
    assert listing.exit_code == 0, listing.output
    lines = [line for line in listing.output.splitlines() if line.startswith("not ready: report_gen/")]
    assert len(lines) == 1, lines
    assert lines[0].startswith("not ready: report_gen/demo: METEOR needs Java"), lines[0]
    ids = [t for t in registry().tasks() if t.startswith("report_gen/")]
    assert len(ids) > 1 and all(t in lines[0] for t in ids), (ids, lines[0])
    assert lines[0].count("METEOR needs Java") == 1, lines[0]
