"""The Ray executor's edges without a cluster: a node lost during the pre-flight check, a refused
connection under token authentication, a Ray too old to refuse a sandbox joining as a node. A stand-in
`ray` module plays the cluster (the real two-node test is tests/test_campaign_ray_cluster.py, slow)."""

from __future__ import annotations

import sys
import types

import pytest
from automedbench.errors import UserError
from automedbench_campaign import executors
from automedbench_campaign.executors import RayExecutor, check_ray_version, ray_init_problem


class NodeDiedError(Exception):
    pass


class FakeRay(types.ModuleType):
    """Just enough of Ray: nodes, remote functions pinned to a node, get/init."""

    def __init__(self, version: str = "2.60.0", init_error: Exception | None = None) -> None:
        super().__init__("ray")
        self.__version__ = version
        self.init_error = init_error
        self.nodes_alive = {"aaaa1111": True, "bbbb2222": True}
        self.dies_during_check: set[str] = set()
        self.problems: dict[str, str] = {}
        self.inited = False

    def is_initialized(self) -> bool:
        return self.inited

    def init(self, **kwargs) -> None:
        if self.init_error:
            raise self.init_error
        self.inited = True

    def nodes(self) -> list[dict]:
        return [{"NodeID": n, "Alive": alive, "NodeManagerHostname": f"host-{n[:4]}"}
                for n, alive in self.nodes_alive.items()]

    def remote(self, *args, **kwargs):
        class Remote:
            def __init__(self, fn=None, node=None):
                self.fn, self.node = fn, node

            def __call__(self, fn):
                return Remote(fn)

            def options(self, scheduling_strategy=None, **_):
                return Remote(self.fn, getattr(scheduling_strategy, "node_id", None))

            def remote(self, *a):
                return ("ref", self.node)

        return Remote(args[0]) if args and callable(args[0]) else Remote()

    def get(self, ref, timeout=None):
        node = ref[1]
        if node in self.dies_during_check:
            self.nodes_alive[node] = False
            raise NodeDiedError(f"The node {node} died while running the task.\n  (40 more lines of Ray)")
        return self.problems.get(node)


@pytest.fixture
def fake_ray(monkeypatch):
    def install(**kwargs) -> FakeRay:
        ray = FakeRay(**kwargs)
        strategies = types.ModuleType("ray.util.scheduling_strategies")

        class NodeAffinitySchedulingStrategy:
            def __init__(self, node_id, soft):
                self.node_id = node_id

        strategies.NodeAffinitySchedulingStrategy = NodeAffinitySchedulingStrategy
        monkeypatch.setitem(sys.modules, "ray", ray)
        monkeypatch.setitem(sys.modules, "ray.util", types.ModuleType("ray.util"))
        monkeypatch.setitem(sys.modules, "ray.util.scheduling_strategies", strategies)
        return ray

    return install


PATHS = {"data root": ("/shared/data", "stamp")}


def test_a_node_lost_during_the_preflight_is_reported_once_and_left_out(fake_ray, tmp_path):
    ray = fake_ray()
    ray.dies_during_check = {"bbbb2222"}
    notes: list[str] = []
    executor = RayExecutor(log_path=tmp_path / "ray.log", notify=notes.append)
    executor.probe(PATHS)  # no exception, no traceback: the sweep goes on with the node left
    assert list(executor.alive) == ["aaaa1111"]
    assert len(notes) == 1 and "bbbb2222"[:12] in notes[0] and "lost" in notes[0]
    assert "died while running" in (tmp_path / "ray.log").read_text()  # Ray's wording kept in the log


def test_every_node_lost_during_the_preflight_is_one_line(fake_ray, tmp_path):
    ray = fake_ray()
    ray.dies_during_check = {"aaaa1111", "bbbb2222"}
    executor = RayExecutor(log_path=tmp_path / "ray.log", notify=lambda m: None)
    with pytest.raises(UserError, match="every node was lost during the pre-flight check") as err:
        executor.probe(PATHS)
    assert "\n" not in str(err.value)


def test_a_failed_check_on_a_live_node_is_one_line_and_an_unseen_path_is_its_problem(fake_ray, tmp_path):
    ray = fake_ray()
    ray.problems = {"aaaa1111": "node host-aaaa cannot see the data root /shared/data"}
    executor = RayExecutor(log_path=tmp_path / "ray.log")
    with pytest.raises(UserError, match="cannot see the data root"):
        executor.probe(PATHS)

    def broken(ref, timeout=None):
        raise RuntimeError("object store full\nmore")

    ray.problems = {}
    ray.get = broken
    with pytest.raises(UserError, match=r"on node aaaa1111 failed \(RuntimeError: object store full\)"):
        executor.probe(PATHS)


def test_token_authentication_refusal_says_what_to_set(fake_ray, tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text("fake-token-for-the-test\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    monkeypatch.setenv("RAY_AUTH_MODE", "token")  # Ray sends the file's token to a given address only then
    fake_ray(init_error=ConnectionError("Failed to connect to GCS: UNAUTHENTICATED: Invalid token\n  detail..."))
    with pytest.raises(UserError) as err:
        RayExecutor(address="127.0.0.1:6379", log_path=tmp_path / "ray.log")
    line = str(err.value)
    assert "\n" not in line and "token authentication is on" in line
    assert f"{home}/.ray/auth_token exists" in line and "RAY_AUTH_TOKEN" in line and "RAY_AUTH_MODE" in line
    assert "fake-token-for-the-test" not in line  # the secret itself is never printed


def test_other_connection_failures_are_one_line_with_rays_first_line():
    line = ray_init_problem(ConnectionError("Could not find any running Ray instance.\nPlease start one"), None)
    assert line == ("ray: could not connect to a local instance: ConnectionError: Could not find any running Ray "
                    "instance.")


@pytest.mark.parametrize(("version", "ok"), [("2.60.0", True), ("2.61.1", True), ("3.0.0", True),
                                             ("2.59.9", False), ("2.9.3", False), ("2.60.0rc1", True)])
def test_ray_older_than_the_release_that_refuses_sandbox_nodes_is_refused(version, ok):
    if ok:
        check_ray_version(version)
    else:
        with pytest.raises(UserError, match=r"needs Ray >= 2\.60"):
            check_ray_version(version)


def test_the_old_ray_is_refused_before_connecting(fake_ray, tmp_path):
    ray = fake_ray(version="2.40.0")
    with pytest.raises(UserError, match=r"found 2\.40\.0"):
        RayExecutor(log_path=tmp_path / "ray.log")
    assert not ray.inited
    assert executors.RAY_MIN_VERSION == (2, 60)


def test_joining_a_cluster_without_a_token_is_refused_unless_accepted_then_said_once(fake_ray, tmp_path, monkeypatch):
    """A driver with no token gets in only where the cluster has no token authentication: refused before connecting
    (polish 6; it was only said, after connecting) unless `allow_no_auth`, then said once."""
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ray/auth_token
    for name in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_MODE"):
        monkeypatch.delenv(name, raising=False)
    ray = fake_ray()
    with pytest.raises(UserError, match="--ray-allow-no-auth"):
        RayExecutor(address="127.0.0.2:6379", log_path=tmp_path / "ray.log")
    assert not ray.inited
    fake_ray()
    notes: list[str] = []
    RayExecutor(address="127.0.0.2:6379", log_path=tmp_path / "ray.log", notify=notes.append, allow_no_auth=True)
    assert len(notes) == 1 and "without a token" in notes[0] and "RAY_AUTH_MODE=token" in notes[0]
    monkeypatch.setenv("RAY_AUTH_TOKEN", "x" * 32)
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    fake_ray()
    notes.clear()
    RayExecutor(address="127.0.0.2:6379", log_path=tmp_path / "ray.log", notify=notes.append)
    assert notes == []


def test_a_local_instance_without_token_authentication_is_said(fake_ray, tmp_path, monkeypatch):
    """Round 34: with its token a local-plain agent joined the sweep's local cluster and ran a task on its head; with
    RAY_AUTH_MODE=disabled it needs none, so starting the local instance so is refused unless accepted
    (`allow_no_auth`, polish 5; it was only said), then said once; by default nothing is."""
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    ray = fake_ray()
    with pytest.raises(UserError, match="--ray-allow-no-auth"):
        RayExecutor(log_path=tmp_path / "ray.log")
    assert not ray.inited
    fake_ray()
    notes: list[str] = []
    RayExecutor(log_path=tmp_path / "ray.log", notify=notes.append, allow_no_auth=True)
    assert len(notes) == 1 and "RAY_AUTH_MODE=disabled" in notes[0] and "local-plain" in notes[0]
    monkeypatch.delenv("RAY_AUTH_MODE")
    fake_ray()
    notes.clear()
    RayExecutor(log_path=tmp_path / "ray.log", notify=notes.append)
    assert notes == []
