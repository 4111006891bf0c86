"""The sweep: deterministic ids, resume, retries of infrastructure failures only, manifest, executors."""

from __future__ import annotations

import json
import os

import pytest
from automedbench.cli import main
from automedbench.errors import UserError
from automedbench.resultproof import write_result
from automedbench.runfolder import RunFolder
from automedbench_campaign.executors import InlineExecutor, execute_payload
from automedbench_campaign.sweep import ATTEMPTS, MANIFEST, RunSpec, Sweep, SweepConfig
from click.testing import CliRunner

DEMO = "segmentation/demo"


def config(tmp_path, data_root, **kw) -> SweepConfig:
    base = {"agents": ["noop"], "tasks": [DEMO], "tiers": ["lite"], "repeats": 2, "out": tmp_path / "runs",
            "data_root": data_root, "executor": "inline"}
    base.update(kw)
    return SweepConfig.of(**base)


def test_run_ids_are_deterministic_and_distinct():
    specs = [RunSpec(a, t, tier, r) for a in ("x", "x/y", "x-y") for t in ("a/b", "a-b") for tier in ("lite",)
             for r in range(3)]
    ids = [s.run_id for s in specs]
    assert len(set(ids)) == len(ids)
    assert RunSpec("x", "a/b", "lite", 0).run_id == RunSpec("x", "a/b", "lite", 0).run_id
    assert all("/" not in i for i in ids)


def test_matrix_is_the_full_product(tmp_path, data_root):
    c = config(tmp_path, data_root, agents=["noop", "reference"], tiers=["lite", "standard"], repeats=3)
    specs = c.specs()
    assert len(specs) == 2 * 1 * 2 * 3 and len({s.run_id for s in specs}) == 12


def test_sweep_runs_then_resumes_without_rerunning(reg, tmp_path, data_root, staged):
    c = config(tmp_path, data_root)
    report = Sweep(c, reg).run()
    assert report.ran == 2 and report.skipped == 0 and report.states == {"scored": 2}
    manifest = json.loads((c.run.out / MANIFEST).read_text())
    assert manifest["matrix"]["repeats"] == 2 and len(manifest["runs"]) == 2
    assert all(r["state"] == "scored" and r["attempts"] == 1 for r in manifest["runs"].values())
    mtimes = {p: os.stat(c.run.out / p / "result.json").st_mtime_ns for p in manifest["runs"]}
    again = Sweep(config(tmp_path, data_root, repeats=3), reg).run()
    assert again.skipped == 2 and again.ran == 1 and again.total == 3
    assert {p: os.stat(c.run.out / p / "result.json").st_mtime_ns for p in mtimes} == mtimes


class FlakyExecutor(InlineExecutor):
    """Fails the first attempt of every run with an infrastructure failure, as a lost node would."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def wait(self, handles):
        payload = handles[0]
        self.seen[payload["run_id"]] = self.seen.get(payload["run_id"], 0) + 1
        if self.seen[payload["run_id"]] == 1:
            os.makedirs(os.path.join(payload["options"]["out"], payload["run_id"]))  # a torn run folder
            return [(payload, {"state": "infrastructure_failure", "error": "node lost", "overall": None,
                               "cost_usd": 0.0, "wall_s": 0.0})]
        return [(payload, execute_payload(payload))]


def test_infrastructure_failures_are_retried_and_kept(reg, tmp_path, data_root, staged):
    c = config(tmp_path, data_root, repeats=1)
    flaky = FlakyExecutor()
    report = Sweep(c, reg).run(flaky)
    assert report.retried == 1 and report.states == {"scored": 1}
    (run_id,) = flaky.seen
    assert flaky.seen[run_id] == 2
    manifest = json.loads((c.run.out / MANIFEST).read_text())
    assert manifest["runs"][run_id]["attempts"] == 2
    assert (c.run.out / ATTEMPTS / run_id / "01-incomplete").is_dir()  # the failed attempt is kept, not deleted


def test_retry_limit_is_respected(reg, tmp_path, data_root, staged):
    class AlwaysDown(InlineExecutor):
        calls = 0

        def wait(self, handles):
            AlwaysDown.calls += 1
            return [(handles[0], {"state": "infrastructure_failure", "error": "down", "overall": None,
                                  "cost_usd": 0.0, "wall_s": 0.0})]

    report = Sweep(config(tmp_path, data_root, repeats=1, retries=2), reg).run(AlwaysDown())
    assert AlwaysDown.calls == 3 and report.states == {"infrastructure_failure": 1}


def test_agent_failures_count_as_finished(reg, tmp_path, data_root, staged):
    c = config(tmp_path, data_root, repeats=1)
    Sweep(c, reg).run()
    (run_id,) = [s.run_id for s in c.specs()]
    path = c.run.out / run_id / "result.json"
    data = json.loads(path.read_text())
    data.pop("proof")
    data["state"] = "agent_failure"
    write_result(RunFolder(path.parent), data)  # as the harness writes it (signed)
    report = Sweep(c, reg).run()
    assert report.skipped == 1 and report.ran == 0
    data["state"] = "infrastructure_failure"  # a stored infrastructure failure is retried on resume
    write_result(RunFolder(path.parent), data)
    report = Sweep(c, reg).run()
    assert report.ran == 1 and report.states == {"scored": 1}
    assert (c.run.out / ATTEMPTS / run_id / "01-infrastructure_failure" / "result.json").is_file()


def test_bad_matrix_fails_before_any_run(reg, tmp_path, data_root):
    with pytest.raises(UserError, match="unknown agent"):
        Sweep(config(tmp_path, data_root, agents=["nope"]), reg).run()
    with pytest.raises(UserError, match="did you mean"):
        Sweep(config(tmp_path, data_root, tasks=["segmentation/dem"]), reg).run()
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow  # a whole sweep
def test_sweep_refuses_a_sandbox_without_isolation_unless_asked(reg, tmp_path, data_root):
    with pytest.raises(UserError, match="no filesystem isolation"):
        Sweep(config(tmp_path, data_root, sandbox="local-plain"), reg).run()
    assert not (tmp_path / "runs").exists()
    report = Sweep(config(tmp_path, data_root, sandbox="local-plain", require_isolation=False), reg).run()
    assert set(report.states) <= {"scored", "agent_failure"}


def test_slots_copy_private_files_and_link_public_ones(reg, tmp_path, staged):
    """Concurrent slots must not share an inode the tripwire watches (the private references)."""
    from automedbench_campaign.slots import slot_root

    _, task = reg.task("segmentation/demo")
    base = staged.root.parent.parent
    root = slot_root(base, 0, [task])
    ref = "segmentation/demo/private/case_000/organ.nii.gz"
    pub = "segmentation/demo/public/case_000/" + task.input_files[0]
    assert os.stat(root / ref).st_ino != os.stat(base / ref).st_ino
    assert (root / ref).read_bytes() == (base / ref).read_bytes()
    assert os.stat(root / pub).st_ino == os.stat(base / pub).st_ino


@pytest.mark.slow  # parallel whole runs
def test_parallel_local_runs_do_not_trip_each_other(reg, tmp_path, data_root, staged):
    """Two runs at once on one data root: each worker slot reads its own hard-linked copy."""
    c = config(tmp_path, data_root, agents=["reference"], repeats=2, workers=2, executor="local")
    report = Sweep(c, reg).run()
    assert report.states == {"scored": 2}
    for run_id in report.records:
        result = json.loads((c.run.out / run_id / "result.json").read_text())
        assert not result["isolation"]["breached"], result["isolation"]["evidence"]
        assert result["aggregate"]["rating"] == "A"


def test_sweep_command_with_dry_run_and_progress(tmp_path, data_root, staged, monkeypatch):
    monkeypatch.setenv("AUTOMEDBENCH_DATA", str(data_root))
    runner = CliRunner()
    out = str(tmp_path / "runs")
    args = ["sweep", "--agents", "noop", "--tasks", DEMO, "--repeats", "2", "--executor", "inline", "--out", out]
    dry = runner.invoke(main, [*args, "--dry-run"], catch_exceptions=False)
    assert dry.exit_code == 0 and "2 run(s): 0 finished, 2 to run" in dry.output
    done = runner.invoke(main, args, catch_exceptions=False)
    assert done.exit_code == 0, done.output
    assert "2 scored" in done.output and "cost $0.00" in done.output
    again = runner.invoke(main, [*args, "--dry-run"], catch_exceptions=False)
    assert "2 finished, 0 to run" in again.output
    bad = runner.invoke(main, ["sweep", "--agents", "noop", "--tasks", DEMO, "--tiers", "ultra", "--out", out])
    assert bad.exit_code == 2 and "no ultra tier" in bad.output


@pytest.mark.slow  # starts a local Ray instance
def test_ray_executor_on_a_local_instance(reg, tmp_path, data_root, staged):
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install ray)")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        c = config(tmp_path, data_root, executor="ray", workers=2, cpus_per_run=1)
        report = Sweep(c, reg).run()
        assert report.states == {"scored": 2}
        for run_id in report.records:
            assert json.loads((c.run.out / run_id / "result.json").read_text())["header"]["run_id"] == run_id
    finally:
        ray.shutdown()


def die_once(payload):
    """Kills its worker process on the first attempt of each run (a marker file remembers), then runs it."""
    marker = os.path.join(payload["options"]["out"], f".died-{payload['run_id']}")
    if not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(9)
    return execute_payload(payload)


@pytest.mark.slow  # a sweep with a killed worker
def test_a_dead_worker_is_an_infrastructure_failure_and_the_pool_recovers(reg, tmp_path, data_root, staged):
    from automedbench_campaign.executors import LocalExecutor

    c = config(tmp_path, data_root, repeats=2, executor="local")
    c.run.out.mkdir(parents=True)
    executor = LocalExecutor(1, die_once)
    try:
        report = Sweep(c, reg).run(executor)
    finally:
        executor.close()
    assert report.states == {"scored": 2} and report.retried == 2
    manifest = json.loads((c.run.out / MANIFEST).read_text())
    assert sorted(r["attempts"] for r in manifest["runs"].values()) == [2, 2]


@pytest.mark.slow  # a whole sweep
def test_sweep_codes_and_leaderboard_end_to_end(reg, tmp_path, data_root, staged):
    """The flawed agents through a sweep: their codes reach the leaderboard's analyses."""
    from automedbench_campaign.leaderboard import build
    from automedbench_campaign.store import load_table

    agents = ["reference", "skip-validate", "no-submit", "incomplete"]
    c = config(tmp_path, data_root, agents=agents, repeats=1)
    assert Sweep(c, reg).run().states == {"scored": 4}
    board = build(load_table([c.run.out]), by=("agent",), resamples=200)
    codes = board.analyses["codes"]
    assert codes["counts"] == {"E1": 0, "E2": 0, "E3": 1, "E4": 1, "E5": 2} and codes["runs_with_codes"] == 3
    cliff = board.analyses["cliff"]
    assert (cliff["0"]["n"], cliff["1"]["n"], cliff["2+"]["n"]) == (1, 2, 1)
    assert cliff["0"]["mean"] > cliff["1"]["mean"] > cliff["2+"]["mean"]
    by_agent = {cell.key["agent"]: cell for cell in board.cells}
    assert by_agent["skip-validate"].scores["S3"]["mean"] == 0.0 and by_agent["no-submit"].scores["S5"]["mean"] == 1.0
