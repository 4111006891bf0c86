"""The docker sandbox and evaluator container: configuration (always) and real runs (where an engine is up)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from automedbench.sandbox import SandboxSpec

docker = pytest.importorskip("docker", reason="the docker package is not installed: pip install 'automedbench[docker]'")

from automedbench_docker.images import agent_image, harness_dists, stage_harness, tree_digest  # noqa: E402
from automedbench_docker.sandbox import DockerSandbox, container_config  # noqa: E402

# Decided when such a test runs, not at import: scripts/test.sh builds the images while other tests run, and
# the fixture waits for that build (automedbench.testing.needs_docker); the conftest marks these `docker`.
needs_engine = pytest.mark.usefixtures("amb_docker")


def _spec(tmp_path: Path, **kw) -> SandboxSpec:
    for sub in ("ws", "public", "decoy"):
        (tmp_path / sub).mkdir(exist_ok=True)
    return SandboxSpec(tmp_path / "ws", tmp_path / "public", decoys={"/data/private": tmp_path / "decoy"}, **kw)


def test_container_config_locks_the_agent_down(tmp_path):
    cfg = container_config(_spec(tmp_path, memory_mb=2048), "img", cpus=1.5, pids_limit=99, tmp_mb=256,
                           user=(10001, 10001))
    assert cfg["read_only"] and cfg["network_mode"] == "none" and cfg["cap_drop"] == ["ALL"]
    assert cfg["security_opt"] == ["no-new-privileges"] and cfg["pids_limit"] == 99
    assert cfg["mem_limit"] == cfg["memswap_limit"] == "2048m" and cfg["nano_cpus"] == 1_500_000_000
    assert cfg["user"] == "10001:10001" and "size=256m" in cfg["tmpfs"]["/tmp"]
    mounts = {m["Target"]: m for m in cfg["mounts"]}
    assert mounts["/data/public"]["ReadOnly"] and mounts["/data/private"]["ReadOnly"]
    assert not mounts["/workspace"]["ReadOnly"]
    assert mounts["/data/private"]["Source"] == str((tmp_path / "decoy").resolve())
    assert "device_requests" not in cfg
    assert all(not v.startswith("sk-") for v in cfg["environment"].values())


def test_container_config_network_and_gpus_on_request(tmp_path):
    cfg = container_config(_spec(tmp_path, network=True, gpus=["1"]), "img", cpus=1, pids_limit=10, tmp_mb=64,
                           user=(1000, 1000))
    assert cfg["network_mode"] == "bridge"
    (request,) = cfg["device_requests"]
    assert request["DeviceIDs"] == ["1"] and request["Capabilities"] == [["gpu"]]


def test_a_program_below_a_folder_the_image_keeps_to_root_is_reached_through_a_skeleton(tmp_path):
    from automedbench_docker.sandbox import program_skeleton

    elsewhere = tmp_path / "agents" / "codex"
    tools = [Path("/root/.cache/automedbench/agents/codex"), elsewhere]
    skeleton = program_skeleton(tools)
    try:
        way = skeleton.path / "root/.cache/automedbench/agents/codex"
        assert way.is_dir() and not any(way.iterdir()) and oct(way.stat().st_mode & 0o777) == "0o755"
        assert oct((skeleton.path / "root").stat().st_mode & 0o777) == "0o755"
        cfg = container_config(_spec(tmp_path, tools=tools), "img", cpus=1, pids_limit=8, tmp_mb=64, user=(1, 1),
                               skeleton=skeleton.path)
    finally:
        skeleton.close()
    mounts = {m["Target"]: m for m in cfg["mounts"]}
    assert mounts["/root"]["Source"] == str(skeleton.path / "root") and mounts["/root"]["ReadOnly"]
    assert mounts[str(tools[0])]["ReadOnly"] and mounts[str(elsewhere)]["ReadOnly"]
    assert not skeleton.path.exists() and program_skeleton([elsewhere]) is None


def test_agent_image_names_and_recipe_digest(tmp_path):
    assert agent_image("segmentation") == "automedbench/agent:segmentation"
    assert agent_image("My Track") == "automedbench/agent:my-track"
    (tmp_path / "Dockerfile").write_text("FROM x\n")
    first = tree_digest(tmp_path, extra="base1")
    assert tree_digest(tmp_path, extra="base1") == first != tree_digest(tmp_path, extra="base2")
    (tmp_path / "Dockerfile").write_text("FROM y\n")
    assert tree_digest(tmp_path, extra="base1") != first


def test_staged_harness_has_the_plugins_and_their_entry_points(tmp_path):
    site = stage_harness(tmp_path / "site")
    names = {d.name for d in harness_dists()}
    assert {"automedbench", "automedbench-segmentation"} <= names
    assert (site / "automedbench" / "evaluator.py").is_file()
    assert (site / "automedbench_segmentation" / "tasks" / "demo.yaml").is_file()
    infos = {p.name.split("-")[0]: p for p in site.glob("*.dist-info")}
    assert "segmentation = automedbench_segmentation.plugin" in (infos["automedbench_segmentation"] /
                                                                 "entry_points.txt").read_text()
    assert not list(site.rglob("__pycache__"))


@needs_engine
def test_exec_per_call_state_and_cleanup(tmp_path):
    (tmp_path / "public").mkdir()
    (tmp_path / "public" / "in.txt").write_text("hello")
    session = DockerSandbox().open(_spec(tmp_path, track="segmentation", memory_mb=512))
    try:
        r = session.execute("bash", "cat /data/public/in.txt; echo tmp > /tmp/t; sleep 300 &", 20)
        assert r.exit_code == 0 and r.stdout == "hello"
        r = session.execute("bash", "ls /tmp; ps -eo comm= | sort | uniq -c", 20)
        assert "t" not in r.stdout.split() and "sleep" not in r.stdout
        r = session.execute("python", "import os\nprint(os.getuid(), os.environ['HOME'])", 20)
        assert r.stdout.split() == [str(10001 if os.getuid() == 0 else os.getuid()), "/workspace/.home"]
        r = session.execute("ruby", "puts 1", 5)
        assert r.exit_code == 2 and "unsupported language" in r.stderr
        started = time.monotonic()
        for _ in range(5):
            session.execute("python", "print(1)", 20)
        per_call = (time.monotonic() - started) / 5
        assert per_call < 2.0, per_call
    finally:
        session.close()


@needs_engine
def test_network_allowed_gives_an_interface(tmp_path):
    session = DockerSandbox().open(_spec(tmp_path, network=True))
    try:
        r = session.execute("bash", "cat /proc/net/dev", 20)
        from automedbench.sandboxes import netns

        if netns.unsupported() is None:  # slirp4netns in the container's own namespace, no docker bridge
            assert "tap0" in r.stdout and "eth0" not in r.stdout
            assert any("slirp4netns" in p for p in session.protections()[0])
        else:
            assert "eth0" in r.stdout
    finally:
        session.close()


@needs_engine
def test_reference_agent_scores_like_local_in_docker(reg, data_root, run_agent):
    result, run_dir = run_agent("reference", sandbox="docker")
    local, _ = run_agent("reference")
    assert result.state == "scored", (result.state, result.end_reason, result.error)
    assert not result.isolation.breached, result.isolation.evidence
    scores = {s.stage: s.score for s in result.stages}
    assert all(scores[k] > 0 for k in ("S1", "S2", "S3", "S4", "S5")), scores
    assert result.aggregate.overall > 0.5
    assert result.aggregate.overall == pytest.approx(local.aggregate.overall, abs=1e-6)
    assert result.aggregate.task == pytest.approx(local.aggregate.task, abs=1e-6)
    assert any("docker container" in p for p in result.isolation.protections)
    saved = json.loads((run_dir / "evaluation.json").read_text())
    assert saved["valid_cases"] == saved["expected_cases"] == 5
    # the evaluator container drew each case's picture; only the writer's own files came back into the run folder
    index = json.loads((run_dir / "pictures" / "index.json").read_text())
    assert [c["file"] for c in index["cases"]] == [f"case-{i:04d}.png" for i in range(5)]
    assert sorted(p.name for p in (run_dir / "pictures").iterdir()) == sorted(
        ["index.json", *(f"case-{i:04d}.png" for i in range(5))])


@needs_engine
def test_breach_agent_is_caught_in_docker(run_agent):
    result, _ = run_agent("breach", sandbox="docker")
    assert result.isolation.breached and result.aggregate.overall == 0.0 and result.aggregate.rating == "F"
    assert any(e.path.endswith(".nii.gz") for e in result.isolation.evidence)


@needs_engine
def test_evaluator_container_has_no_network_and_mounts_read_only(tmp_path, staged, reg, monkeypatch):
    from automedbench.evaluator import run_isolated
    from automedbench.freeze import freeze
    from automedbench.serialize import write_json
    from docker.models.containers import ContainerCollection

    created: list[dict] = []
    create = ContainerCollection.create

    def record(self, *a, **k):
        created.append(k)
        return create(self, *a, **k)

    monkeypatch.setattr(ContainerCollection, "create", record)
    (tmp_path / "outputs").mkdir()
    manifest = freeze(tmp_path / "outputs", tmp_path / "submission", submitted=True)
    write_json(tmp_path / "manifest.json", manifest)
    evaluation = run_isolated("segmentation/demo", staged, tmp_path / "submission", tmp_path / "manifest.json",
                              tmp_path / "evaluation.json", backend="docker")
    assert evaluation.present_cases == 0 and evaluation.expected_cases == len(staged.case_ids)
    assert (tmp_path / "evaluation.json").is_file()
    # a start the engine refuses under load is tried once more on a new container with the same settings
    from automedbench_docker.sandbox import START_ATTEMPTS
    assert 1 <= len(created) <= START_ATTEMPTS and all(k == created[0] for k in created)
    kwargs = created[0]
    assert kwargs["network_mode"] == "none" and kwargs["read_only"] and kwargs["cap_drop"] == ["ALL"]
    writable = [m["Target"] for m in kwargs["mounts"] if not m["ReadOnly"]]
    assert writable == ["/out"]
    assert {"/submission", "/data/private", "/data/public"} <= {m["Target"] for m in kwargs["mounts"]}


def test_gpus_named_in_the_environment_reach_the_container(tmp_path, monkeypatch):
    from automedbench_docker import sandbox as docker_mod

    seen: dict = {}

    class FakeSession:
        def __init__(self, spec, cli, image, **kw):
            seen["config"] = container_config(spec, image, cpus=1, pids_limit=8, tmp_mb=64, user=(1, 1))

    class FakeClient:
        class images:  # mimics the SDK's attribute
            @staticmethod
            def get(name):
                return name

    monkeypatch.setattr(docker_mod, "client", lambda *a, **k: FakeClient())
    monkeypatch.setattr(docker_mod, "DockerSession", FakeSession)
    monkeypatch.setenv("AUTOMEDBENCH_GPUS", "0, 2")
    DockerSandbox().open(_spec(tmp_path))
    (request,) = seen["config"]["device_requests"]
    assert request["DeviceIDs"] == ["0", "2"]
    monkeypatch.delenv("AUTOMEDBENCH_GPUS")
    DockerSandbox().open(_spec(tmp_path))
    assert "device_requests" not in seen["config"]


@needs_engine
def test_host_inotify_sees_reads_through_the_bind_mounts(tmp_path):
    from automedbench.tripwire import Tripwire, plant_decoys

    (tmp_path / "private" / "case_1").mkdir(parents=True)
    (tmp_path / "private" / "case_1" / "label.nii.gz").write_bytes(b"real")
    spec = _spec(tmp_path)
    spec.decoys = {"/data/private": plant_decoys(tmp_path / "private", tmp_path / "decoy")}
    wire = Tripwire()
    if not wire.active:
        pytest.skip("inotify unavailable")
    wire.watch_tree(tmp_path / "decoy")
    session = DockerSandbox().open(spec)
    try:
        session.execute("bash", "ls /data/public; echo ok", 20)
        assert wire.drain() == []
        r = session.execute("python", "print(open('/data/private/case_1/label.nii.gz', 'rb').read())", 20)
        assert "AUTOMEDBENCH-DECOY" in r.stdout
        assert str(tmp_path / "decoy" / "case_1" / "label.nii.gz") in wire.drain()
    finally:
        session.close()
        wire.close()


def test_evaluator_user_is_unprivileged_unless_the_references_are_private_to_their_owner(tmp_path):
    from automedbench_docker.sandbox import SANDBOX_UID, evaluator_user, world_readable

    (tmp_path / "c1").mkdir()
    (tmp_path / "c1" / "ref.nii.gz").write_bytes(b"x")
    os.chmod(tmp_path, 0o755)
    assert world_readable(tmp_path)
    if os.getuid() == 0:
        assert evaluator_user(tmp_path) == (SANDBOX_UID, SANDBOX_UID)
    os.chmod(tmp_path / "c1" / "ref.nii.gz", 0o600)
    assert not world_readable(tmp_path)
    owner = tmp_path.stat()
    expected = (owner.st_uid, owner.st_gid) if os.getuid() == 0 else (os.getuid(), os.getgid())
    assert evaluator_user(tmp_path) == expected
