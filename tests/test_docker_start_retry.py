"""A container's start (the agent's and the evaluator's): a start the engine refuses once is retried on a new
container (the refused one removed); a second refusal, or a missing image, is the harness failure it always was.
No engine needed."""

from __future__ import annotations

import pytest
from automedbench.errors import InfrastructureError

sandbox = pytest.importorskip("automedbench_docker.sandbox")


class ImageNotFound(Exception):
    pass


class FakeContainer:
    def __init__(self, engine, refuse):
        self.engine, self.refuse, self.removed = engine, refuse, False

    def start(self):
        if self.refuse:
            raise RuntimeError('OCI runtime create failed: exec: "python3": executable file not found in $PATH')

    def remove(self, force=False):
        self.removed = force


class FakeContainers:
    def __init__(self, refusals, missing=False):
        self.refusals, self.missing, self.made, self.kwargs = refusals, missing, [], []

    def create(self, **kwargs):
        if self.missing:
            raise ImageNotFound("no such image")
        self.kwargs.append(kwargs)
        container = FakeContainer(self, refuse=len(self.made) < self.refusals)
        self.made.append(container)
        return container


class FakeClient:
    def __init__(self, refusals, missing=False):
        self.containers = FakeContainers(refusals, missing)


CONFIG = {"image": "automedbench/agent:x", "command": ["python3", "-c", "pass"], "detach": True}


def test_a_start_refused_once_is_retried_on_a_new_container():
    cli = FakeClient(refusals=1)
    started = sandbox.start_container(cli, CONFIG, "automedbench/agent:x")
    first, second = cli.containers.made
    assert started is second and first.removed and not second.removed
    assert all("detach" not in k and k["image"] == "automedbench/agent:x" for k in cli.containers.kwargs)


def test_a_second_refusal_is_a_harness_failure_naming_the_image():
    cli = FakeClient(refusals=2)
    with pytest.raises(InfrastructureError, match="could not start the agent container from automedbench/agent:x"):
        sandbox.start_container(cli, CONFIG, "automedbench/agent:x")
    assert len(cli.containers.made) == 2 and all(c.removed for c in cli.containers.made)


def test_a_missing_image_is_not_retried():
    cli = FakeClient(refusals=0, missing=True)
    with pytest.raises(InfrastructureError, match="no such image"):
        sandbox.start_container(cli, CONFIG, "automedbench/agent:x")
    assert cli.containers.made == []


def test_the_evaluator_container_start_is_named_in_the_failure():
    # (through evaluate_in_container with a fake engine: tests/test_review22.py)
    image, cli = "automedbench/evaluator:latest", FakeClient(refusals=1)
    assert sandbox.start_container(cli, CONFIG, image, role="evaluator") is cli.containers.made[1]
    with pytest.raises(InfrastructureError, match="could not start the evaluator container from automedbench/eval"):
        sandbox.start_container(FakeClient(refusals=2), CONFIG, image, role="evaluator")
