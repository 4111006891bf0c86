"""The docker sandbox, its evaluator and its `images` command, registered through the hooks a third party uses."""

from __future__ import annotations

from automedbench.api import hookimpl


@hookimpl
def automedbench_register_sandboxes(register) -> None:
    def docker_sandbox(**options):
        from .sandbox import DockerSandbox

        return DockerSandbox(**options)

    register("docker", docker_sandbox,
             "docker container per run (read-only root, no network, limits) and an evaluator container")


@hookimpl
def automedbench_register_evaluators(register) -> None:
    def docker():
        from .sandbox import evaluate_in_container

        return evaluate_in_container

    register("docker", docker, "network-less, read-only evaluator container (with the docker sandbox)")


@hookimpl
def automedbench_register_commands(cli) -> None:
    """images: the docker sandbox builds its own images."""
    from .cli import register

    register(cli)
