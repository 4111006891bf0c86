"""The docker pieces fail with one clear line where the package or the engine is missing."""

from __future__ import annotations

import sys

from automedbench.cli import main
from click.testing import CliRunner


def test_without_the_docker_package_the_sandbox_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "docker", None)  # makes `import docker` raise ImportError
    from automedbench_docker.sandbox import DockerSandbox

    ok, why = DockerSandbox().available()
    assert not ok and "pip install 'automedbench[docker]'" in why


def test_run_with_docker_but_no_package_is_one_line_and_exit_2(monkeypatch, data_root, staged, tmp_path):
    monkeypatch.setitem(sys.modules, "docker", None)
    monkeypatch.setenv("AUTOMEDBENCH_DATA", str(data_root))
    result = CliRunner().invoke(main, ["run", "--task", "segmentation/demo", "--agent", "noop", "--sandbox", "docker",
                                       "--out", str(tmp_path / "runs"), "--quiet"])
    assert result.exit_code == 2
    assert "automedbench[docker]" in result.output and "Traceback" not in result.output


def test_no_engine_is_a_clear_error(monkeypatch):
    import pytest

    pytest.importorskip("docker", reason="the docker package is not installed")
    from automedbench_docker.sandbox import DockerSandbox

    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    ok, why = DockerSandbox().available()
    assert not ok and "no docker engine reachable" in why


def test_images_build_help_explains_the_options():
    result = CliRunner().invoke(main, ["images", "build", "--help"])
    assert result.exit_code == 0
    assert "--base-image" in result.output and "debootstrap" in result.output and "--force" in result.output


def test_images_list_names_each_tracks_recipe_without_an_engine(monkeypatch):
    """`images list`: the default agent image and one line per track recipe, read from the registry (the
    tracks' package data), with no engine reachable."""
    from pathlib import Path

    from automedbench.plugins import registry

    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    result = CliRunner().invoke(main, ["images", "list"])
    assert result.exit_code == 0, result.output
    listed = dict(line.split("  ", 1) for line in result.output.splitlines())
    assert (Path(listed["automedbench/agent:default"]) / "Dockerfile").is_file()
    expected = {f"automedbench/agent:{t.name}": t.agent_image() for t in registry().tracks() if t.agent_image()}
    assert expected and {k: Path(v) for k, v in listed.items() if k in expected} == expected


def test_images_build_refuses_an_unknown_track_before_building(monkeypatch):
    """`images build --track NAME` builds only the named tracks' agent images (a test run builds what its
    tests use); a name without a recipe is one line naming the tracks that have one, before any engine call."""
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    result = CliRunner().invoke(main, ["images", "build", "--track", "segmentation", "--track", "no-such-track"])
    assert result.exit_code == 2, result.output
    assert "no-such-track" in result.output and "segmentation" in result.output
    assert "Traceback" not in result.output and "engine" not in result.output
