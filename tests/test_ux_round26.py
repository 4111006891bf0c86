"""A researcher comparing agents, round 26: a sweep of the reference, a trivial, a crashing and a timed-out agent over
three tracks' demos, then the leaderboard, its site and each run's page. A `sweep --workers 2` drew no image of any
image task (every input refused as "a hard link": the worker slots hard-link the staged data); a task's page on the
site showed no picture of the task at all."""

from __future__ import annotations

import json
import re

import test_cli_newuser

cli = test_cli_newuser.cli  # the new user's command line (CliRunner, errors as a pipe sees them), shared


def test_a_parallel_sweep_draws_the_pictures_of_an_image_task(cli, tmp_path):
    """Each worker of `sweep --workers 2` reads its own data root, whose public files are hard links to the staged
    ones; every picture read the input through the download checks, which refuse a file with two names, so each
    VQA case's page said "no picture: UserError: ...image.png: a hard link (3 names for one file ...)"."""
    out = tmp_path / "sweep"
    swept = cli("sweep", "--agents", "reference,noop", "--tasks", "vqa/demo", "--workers", "2", "--out", out)
    assert swept.exit_code == 0, swept.output
    (run,) = out.glob("reference.vqa-demo.*")
    index = json.loads((run / "pictures" / "index.json").read_text())
    cases = index["cases"]
    assert cases and all(c["file"] for c in cases), [c.get("note") for c in cases]
    assert not any("hard link" in (c.get("note") or "") for c in cases)
    page = tmp_path / "page.html"
    assert cli("view", run, "--out", page).exit_code == 0
    text = page.read_text()
    assert "hard link" not in text
    assert len(re.findall(r'<img src="data:image/png;base64,[^"]+" alt="case ', text)) == len(cases)
