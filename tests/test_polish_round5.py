"""Polish round 5: the items earlier rounds named and left. A run its judge could not grade exited 0 with Overall
null; `judge-agreement` over no usable run exited 0 with an empty table; `rejudge` named the judge without its
model; one broken task file hid its track's every task; decoys of a SIGKILLed harness stayed in the state folder;
a local Ray instance without token authentication only warned; the verdict's bound decoded plan.png (and read the
evaluation) for items nobody graded; a bubblewrap that fails every call's mounts was the agent's failure."""

from __future__ import annotations

import json
from typing import Any

import pytest
import test_cli_newuser
from automedbench.testing import needs
from test_backends_fakes import Reply, openai_reply, serve_fake_llm
from test_ux_round28 import _verdict  # every item asked for at its highest level

cli = test_cli_newuser.cli  # the new user's command line (CliRunner), shared
fake_llm = pytest.fixture(serve_fake_llm, name="fake_llm")
KEY_ENV = "AMB_POLISH5_JUDGE_KEY"


def _judge(fake_llm, model: str, flag: str = "--judge-option") -> list[str]:
    return [flag, f"model={model}", flag, f"base_url={fake_llm.url}/v1", flag, f"api_key_env={KEY_ENV}",
            flag, "max_retries=0", flag, "parse_retries=0"]


FAILURES = {
    "unknown model": lambda _r: Reply(404, {"error": {"message": "The model `gpt-4q` does not exist"}}),
    "malformed JSON": lambda _r: openai_reply("All good, 10/10!"),
}


@needs("openai")
@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_a_run_its_judge_cannot_grade_exits_1_recorded_with_the_next_step(cli, tmp_path, fake_llm, monkeypatch,
                                                                         failure):
    """Before: exit 0 with Overall null, as a graded run; a script running many runs counted it as graded."""
    monkeypatch.setenv(KEY_ENV, "sk-polish5")
    fake_llm.fallback = FAILURES[failure]
    out = tmp_path / "runs"
    done = cli("run", "--task", "toy/vowels", "--agent", "reference", "--judge", "openai",
               *_judge(fake_llm, "gpt-4q"), "--out", out, "--quiet")
    assert done.exit_code == 1, done.output
    (run_dir,) = out.iterdir()
    record = json.loads((run_dir / "result.json").read_text())
    assert record["state"] == "scored" and record["aggregate"]["overall"] is None, record["aggregate"]
    said = " ".join(done.stderr.split())
    assert (f"not graded: the openai judge could not grade S1–S3, so Agentic and Overall are null; the run is "
            f"recorded. Next, once the judge answers: automedbench rejudge {run_dir} --judge openai") in said, said
    assert cli("verify", run_dir).exit_code == 0  # the record is the harness's, as a graded one


def test_a_run_its_judge_graded_still_exits_0(cli, tmp_path):
    done = cli("run", "--task", "toy/vowels", "--agent", "reference", "--out", tmp_path / "runs", "--quiet")
    assert done.exit_code == 0 and "not graded" not in done.output, done.output


@needs("openai")
def test_agreement_over_no_usable_run_exits_1_and_rejudge_names_the_model(cli, tmp_path, fake_llm, monkeypatch):
    """Before: `judge-agreement` with every run skipped printed "over 0 run(s)", a table of undefined kappas, exit 0;
    `rejudge` said "re-graded RUN with openai" whichever model graded it."""
    monkeypatch.setenv(KEY_ENV, "sk-polish5")

    def by_model(request: dict[str, Any]) -> Reply:
        if request["body"]["model"] == "gone":
            return Reply(404, {"error": {"message": "The model `gone` does not exist"}})
        return _verdict(request)

    fake_llm.fallback = by_model
    out = tmp_path / "runs"
    assert cli("run", "--task", "toy/vowels", "--agent", "noop", "--out", out, "--quiet").exit_code == 0
    (run_dir,) = out.iterdir()
    failed = cli("judge-agreement", out, "--judge-a", "rules", "--judge-b", "openai",
                 *_judge(fake_llm, "gone", "--judge-b-option"))
    said = " ".join(failed.output.split())
    assert failed.exit_code == 1, said
    assert ("no agreement measured: no run has verdicts by both rules and openai (every run skipped); fix what the "
            "lines above name") in said, said
    as_json = cli("judge-agreement", out, "--judge-a", "rules", "--judge-b", "openai", "--json",
                  *_judge(fake_llm, "gone", "--judge-b-option"))
    assert as_json.exit_code == 1 and json.loads(as_json.stdout)["runs"] == 0, as_json.output
    agreed = cli("judge-agreement", out, "--judge-a", "rules", "--judge-b", "openai",
                 *_judge(fake_llm, "judge-b", "--judge-b-option"))
    assert agreed.exit_code == 0 and "over 1 run(s)" in agreed.output, agreed.output
    regraded = cli("rejudge", run_dir, "--judge", "openai", *_judge(fake_llm, "judge-b"))
    assert regraded.exit_code == 0, regraded.output
    assert f"re-graded {run_dir} with openai (version 1/judge-b)" in " ".join(regraded.output.split())


def test_a_sweep_refuses_a_local_ray_instance_without_token_authentication(cli, tmp_path, monkeypatch):
    """Red team 34: under RAY_AUTH_MODE=disabled the sweep's local Ray instance took any process that reached it as
    a node (a local-plain agent ran code on its head) and the sweep only warned. Now one line, before any run,
    naming the option that accepts it."""
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    out = tmp_path / "sweep"
    done = cli("sweep", "--agents", "reference", "--tasks", "toy/vowels", "--executor", "ray", "--out", out)
    assert done.exit_code == 2, done.output
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: ray: RAY_AUTH_MODE=disabled starts the local instance without token "
                           "authentication") and line.endswith("unset RAY_AUTH_MODE, or pass --ray-allow-no-auth "
                                                               "to accept that"), line
    assert not (out / "sweep.json").exists() and not list(out.glob("*/result.json"))
    monkeypatch.setenv("RAY_AUTH_MODE", "token")  # a cluster that asks for a token is not refused here
    from automedbench.plugins import registry
    from automedbench_campaign.sweep import SweepConfig, validate

    validate(SweepConfig.of(["reference"], ["toy/vowels"], ["lite"], executor="ray", require_isolation=False),
             registry())


def test_one_broken_task_file_hides_only_its_own_task(tmp_path, monkeypatch):
    """Before: a typo in one task file (`workspace_mbs:`) hid every task of its track from `automedbench tasks`,
    with a plugin-problem line; the track's sound tasks are listed now, and one line names the file and field."""
    from automedbench.testing import run_cli
    from test_ux_round27 import _toy_copy

    monkeypatch.setenv("AUTOMEDBENCH_DATA", str(tmp_path / "data"))
    with _toy_copy(tmp_path, "ambp5", lambda text: text):
        good = (tmp_path / "tasks" / "vowels.yaml").read_text()
        broken = tmp_path / "tasks" / "typo.yaml"
        broken.write_text(good.replace("ambp5/vowels", "ambp5/typo") + "workspace_mbs: 256\n")
        listed = run_cli("tasks")
        assert listed.exit_code == 0, listed.output
        assert "ambp5/vowels" in listed.stdout and "ambp5/typo" not in listed.stdout, listed.stdout
        (line,) = [x for x in listed.stderr.splitlines() if "ambp5" in x]
        assert f"tasks of track ambp5: task file {broken}: unknown field(s) workspace_mbs (that task is not " \
               "listed)" in line, listed.stderr
        ran = run_cli("validate-task", "ambp5/typo")  # the broken one itself: its own file and field
        assert ran.exit_code == 2 and "unknown field(s) workspace_mbs" in ran.stderr, ran.output
        assert f"task file {broken}" in ran.stderr, ran.stderr
        mistyped = run_cli("validate-task", "ambp5/vowles")  # another id: the nearest, not the broken file
        assert mistyped.exit_code == 2 and "did you mean 'ambp5/vowels'" in mistyped.stderr, mistyped.output


HOLDS_DECOYS = """
import sys, time
from automedbench.tripwire import run_decoy_dir
with run_decoy_dir() as folder:
    (folder / "README").write_text("bait")
    print(folder, flush=True)
    time.sleep(600)
"""


def _holding_decoys(env: dict[str, str]) -> tuple[Any, Any]:
    """A harness process in its agent phase: its decoy folder made, the process alive until killed."""
    import subprocess
    import sys
    from pathlib import Path

    proc = subprocess.Popen([sys.executable, "-c", HOLDS_DECOYS], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    return proc, Path(proc.stdout.readline().strip())


def test_decoys_of_a_killed_harness_are_reaped_by_the_next_run(cli, tmp_path, monkeypatch):
    """Before: a harness SIGKILLed in its agent phase left its decoy folder in the state folder for good (the run
    removes it only as it unwinds); the next run now removes it, as it unmounts a dead run's workspace, and leaves
    a live run's alone."""
    import os
    import signal

    monkeypatch.setenv("AUTOMEDBENCH_STATE", str(tmp_path / "state"))
    env = dict(os.environ)
    killed, stale = _holding_decoys(env)
    alive, live = _holding_decoys(env)
    try:
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
        assert stale.is_dir() and live.is_dir() and stale.parent == live.parent
        ran = cli("run", "--task", "toy/vowels", "--agent", "reference", "--out", tmp_path / "runs", "--quiet")
        assert ran.exit_code == 0, ran.output
        left = sorted(p.name for p in live.parent.iterdir())
        assert left == sorted([live.name, f"{live.name}.lock"]), left  # the dead one's and the run's own gone
    finally:
        alive.kill()
        alive.wait(timeout=30)


def test_the_bound_decodes_plan_png_once_and_reads_the_evaluation_only_when_a_cap_asks(cli, tmp_path, monkeypatch):
    """Before: the harness's bound on the verdict decoded plan.png (twice) and read evaluation.json for every run,
    a Lite one grading no s1e/s1f and a run with no pilot whose S3 no evaluation could lower; a rules-judged
    Standard run decoded plan.png in s1e, s1f and the bound. Now each is read once, when an item needs it."""
    import automedbench.planimage as planimage
    from automedbench.runfolder import RunFolder

    reads = {"png": 0, "evaluation": 0}
    real_png, real_evaluation = planimage.read_plan_png, RunFolder.load_evaluation

    def counted_png(data):
        reads["png"] += 1
        return real_png(data)

    def counted_evaluation(self):
        reads["evaluation"] += 1
        return real_evaluation(self)

    monkeypatch.setattr(planimage, "read_plan_png", counted_png)
    monkeypatch.setattr(RunFolder, "load_evaluation", counted_evaluation)

    def run(agent: str, tier: str) -> dict[str, Any]:
        reads.update(png=0, evaluation=0)
        out = tmp_path / f"{agent}-{tier}"
        assert cli("run", "--task", "toy/vowels", "--agent", agent, "--tier", tier, "--out", out,
                   "--quiet").exit_code == 0
        (record,) = out.glob("*/result.json")
        return json.loads(record.read_text())

    run("reference", "lite")
    assert reads["png"] == 0 and reads["evaluation"] == 1, reads  # S3's last cap reads it; no s1e/s1f graded
    noop = run("noop", "lite")
    assert reads == {"png": 0, "evaluation": 0}, reads  # no pilot: S3 is capped at 0 before the evaluation
    assert next(s for s in noop["stages"] if s["stage"] == "S3")["score"] == 0.0
    standard = run("reference", "standard")
    assert reads["png"] == 1, reads
    items = {i["id"]: i["value"] for i in json.loads(
        (next((tmp_path / "reference-standard").iterdir()) / "judge.json").read_text())["items"]}
    assert items["s1e_plan_png"] == 1.0 and items["s1f_plot_pipeline"] == 1.0, items  # read, and a diagram
    assert standard["aggregate"]["overall"] is not None


FAKE_BWRAP = """#!/bin/sh
# bubblewrap that passes the start-up probe (no /workspace mount) and fails {which} with a mount error
for last; do :; done
case " $* " in *" /workspace "*)
  {spare}
  echo "bwrap: Can't bind mount /oldroot/x on /newroot/workspace: No such file or directory" >&2; exit 1;;
esac
exec {real} "$@"
"""


@pytest.fixture
def mount_failing_bwrap(tmp_path, monkeypatch):
    """A bubblewrap on PATH that passes the start-up probe and fails calls with the run's mounts: every such call
    (`every`), or only the agent's, a harmless `true` with the same mounts starting (`agent`)."""
    import os
    import shutil
    from pathlib import Path

    from automedbench.sandboxes import local

    real = shutil.which("bwrap")
    if real is None or local._bwrap_probe(real):
        pytest.skip("no working bubblewrap here")

    def install(which: str) -> None:
        folder = tmp_path / f"bin-{which}"
        folder.mkdir()
        program = folder / "bwrap"
        spare = 'case "$last" in */true) exec ' + real + ' "$@";; esac' if which == "agent" else ":"
        program.write_text(FAKE_BWRAP.format(which=which, spare=spare, real=real))
        program.chmod(0o755)
        monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
        assert Path(shutil.which("bwrap") or "") == program

    local._bwrap_probe.cache_clear()
    yield install
    local._bwrap_probe.cache_clear()


def test_a_bwrap_that_fails_every_calls_mounts_is_an_infrastructure_failure(cli, tmp_path, mount_failing_bwrap):
    """Before: bubblewrap passed its start-up probe (system folders only) but failed each call's own mounts; every
    call ended with bwrap's error as the agent's, and the run was scored F (exit 0), as if the agent had failed."""
    mount_failing_bwrap("every")
    done = cli("run", "--task", "toy/vowels", "--agent", "reference", "--out", tmp_path / "runs", "--quiet")
    assert done.exit_code == 3, done.output
    (record,) = (tmp_path / "runs").glob("*/result.json")
    result = json.loads(record.read_text())
    assert result["state"] == "infrastructure_failure", result["state"]
    assert ("bubblewrap passed its start-up probe but cannot start a call with this run's mounts (bwrap: Can't bind "
            "mount") in result["error"] and "a harmless call with the same mounts fails too" in result["error"]


def test_a_call_that_alone_fails_its_mounts_stays_the_agents(cli, tmp_path, mount_failing_bwrap):
    """What the agent's call can cause is never a retryable failure: when a harmless call with the same mounts
    starts, the failed call's answer is the agent's, as before."""
    mount_failing_bwrap("agent")
    done = cli("run", "--task", "toy/vowels", "--agent", "reference", "--out", tmp_path / "runs", "--quiet")
    assert done.exit_code == 0, done.output
    (record,) = (tmp_path / "runs").glob("*/result.json")
    result = json.loads(record.read_text())
    assert result["state"] == "scored" and result["task"]["strict"] == 0.0, result["state"]
    calls = [json.loads(line) for line in (record.parent / "trajectory.jsonl").read_text().splitlines()]
    assert any("bwrap: Can't bind mount" in str(event.get("stderr", "")) for event in calls)
